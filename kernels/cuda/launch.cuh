#pragma once
// What the CUDA kernel files share: the launch shape helpers and the 16-byte row moves (one
// definition, so every kernel takes rows the same way). Internal to kernels/cuda.
#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "kernels/cuda/storage.cuh"

namespace moe::cuda {

constexpr int kThreads = 256;

inline int blocks_for(int64_t n, int threads = kThreads) {
  return int(std::min<int64_t>((n + threads - 1) / threads, 65535 * 8));
}

// One block per row, at most 2^16 blocks (grid-stride beyond).
inline int row_grid(int64_t rows) {
  return int(std::max<int64_t>(1, std::min<int64_t>(rows, 1 << 16)));
}

// The last index i in [0, n) with sorted[i] <= x (sorted nondecreasing, sorted[0] <= x): the
// group whose start offset is the last at or below row x (empty groups share their successor's
// start, and the last of equal starts is taken). Indices in I: int where a hot kernel counts in
// int (the grouped GEMM's tile schedule).
template <class T, class I, class X>
__device__ inline I last_at_or_below(const T* sorted, I n, X x) {
  I lo = 0, hi = n - 1;
  while (lo < hi) {
    const I mid = (lo + hi + 1) / 2;
    if (sorted[mid] <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The sum of v over lanes 0..lane, to each lane (every lane of the warp calls it).
__device__ inline int warp_inclusive_sum(int v) {
  const int lane = threadIdx.x % 32;
  for (int d = 1; d < 32; d *= 2) {
    const int up = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += up;
  }
  return v;
}

// The largest of a warp's v, to every lane.
__device__ inline float warp_max(float v) {
  for (int d = 16; d > 0; d /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, d));
  return v;
}

// The largest of the block's non-negative v, to every thread; every thread of the block calls it
// (blockDim.x a multiple of 32).
__device__ inline float block_max(float v) {
  __shared__ float warps[32];
  v = warp_max(v);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
  __syncthreads();
  float m = 0.0f;
  for (int w = 0; w < int(blockDim.x / 32); ++w) m = fmaxf(m, warps[w]);
  __syncthreads();  // warps[] is free for the next call
  return m;
}

// ---- row moves: one block per row, 16-byte vectors when the row allows. ----
template <class T>
__device__ inline void copy_row(T* dst, const T* src, int64_t H) {
  if ((H * sizeof(T)) % 16 == 0 && (reinterpret_cast<uintptr_t>(dst) % 16 == 0) &&
      (reinterpret_cast<uintptr_t>(src) % 16 == 0)) {
    const int64_t n = H * sizeof(T) / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) d[j] = s[j];
  } else {
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) dst[j] = src[j];
  }
}

template <class T>
__device__ inline void zero_row(T* dst, int64_t H) {
  if ((H * sizeof(T)) % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (int64_t j = threadIdx.x; j < int64_t(H * sizeof(T) / 16); j += blockDim.x)
      d[j] = make_uint4(0, 0, 0, 0);
  } else {
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) store_f(dst + j, 0.0f);
  }
}

// Whether rows of H elements of T at these bases allow 16-byte moves: whole 16-byte row lengths
// (also for the fp32 rows H * 4 bytes, which then hold whole packs too) and aligned bases.
inline bool aligned16(std::initializer_list<const void*> bases) {
  for (const void* b : bases)
    if (reinterpret_cast<uintptr_t>(b) % 16 != 0) return false;
  return true;
}
template <class T>
inline bool rows_take_pack16(int64_t H, std::initializer_list<const void*> bases) {
  return H % kPack16<T> == 0 && aligned16(bases);
}

}  // namespace moe::cuda
