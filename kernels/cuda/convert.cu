#include <cstdint>

#include "core/error.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/storage.cuh"

namespace moe::cuda {
namespace {

template <class T>
__global__ void storage_to_f32_kernel(const T* src, int64_t n, float* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = load_f(src + i);
}

// N elements a thread (N = 8: 16-byte moves, src and dst 16-byte aligned; the last n % N by
// the first threads, one each): the step's last pass over dx, whose scalar 4-byte loads ran at
// 1.6 TB/s (results/2026-11-28-session37's profile: 24 us of Qwen3-30B-A3B's step).
template <class T, int N>
__global__ void f32_to_storage_kernel(const float* src, int64_t n, T* dst) {
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = first * N; i + N <= n; i += stride * N) {
    float v[N];
    load_n<N>(src + i, v);
    store_n<N>(dst + i, v);
  }
  const int64_t tail = n / N * N + first;
  if (tail < n) store_f(dst + tail, src[tail]);
}

template <class T>
__global__ void fill_seeded_kernel(InitRule rule, int64_t begin, int64_t n, T* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    store_f(dst + i, rule.value(uint64_t(begin + i)));
}

// Operands of the calibration GEMM: a fixed pattern in [-0.5, 0.5), never zero-filled, so that
// the tensor cores toggle (and draw power) as they do on real data.
template <class S>
__global__ void calibration_fill_kernel(S* dst, int64_t n, uint32_t salt) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = (uint32_t(i) ^ salt) * 2654435761u;
    h ^= h >> 16;
    store_f(dst + i, float(h & 0xffff) / 65536.0f - 0.5f);
  }
}

// Bit 3 (the exponent field's lowest) cleared: the field stays below 15, where e4m3's NaN lies.
__global__ void fp8_calibration_fill_kernel(uint8_t* dst, int64_t n, uint32_t salt) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = (uint32_t(i) ^ salt) * 2654435761u;
    h ^= h >> 16;
    dst[i] = uint8_t(h & 0xf7u);
  }
}

}  // namespace

void storage_to_f32(const void* src, int64_t n, DType dtype, float* dst, cudaStream_t stream) {
  if (n == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    storage_to_f32_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const S*>(src), n,
                                                                  dst);
  });
  CUDA_CHECK(cudaGetLastError());
}

void f32_to_storage(const float* src, int64_t n, DType dtype, void* dst, cudaStream_t stream) {
  if (n == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    const bool wide = aligned16({src, dst});
    auto* k = wide ? f32_to_storage_kernel<S, 8> : f32_to_storage_kernel<S, 1>;
    k<<<blocks_for(wide ? (n + 7) / 8 : n), kThreads, 0, stream>>>(src, n, static_cast<S*>(dst));
  });
  CUDA_CHECK(cudaGetLastError());
}

void fill_seeded(const InitRule& rule, int64_t begin, int64_t n, DType dtype, void* dst,
                 cudaStream_t stream) {
  if (n == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    fill_seeded_kernel<<<blocks_for(n), kThreads, 0, stream>>>(rule, begin, n,
                                                               static_cast<S*>(dst));
  });
  CUDA_CHECK(cudaGetLastError());
}

void fill_calibration_pattern(void* dst, int64_t n, uint32_t salt, DType dtype,
                              cudaStream_t stream) {
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    calibration_fill_kernel<<<1024, 256, 0, stream>>>(static_cast<S*>(dst), n, salt);
  });
  CUDA_CHECK(cudaGetLastError());
}

void fill_fp8_calibration_pattern(uint8_t* dst, int64_t n, uint32_t salt, cudaStream_t stream) {
  fp8_calibration_fill_kernel<<<1024, 256, 0, stream>>>(dst, n, salt);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace moe::cuda
