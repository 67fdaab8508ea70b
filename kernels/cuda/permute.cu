#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "core/layout.h"
#include "kernels/cuda/block_scan.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/permute.h"
#include "kernels/cuda/storage.cuh"

namespace moe::cuda {
namespace {

// ---- permute: one block per token, its row read once and written, bit for bit, to each of its
// K rows sent (-1: dropped by the capacity, not sent), in 16-byte vectors where rows allow them
// (V = uint4), else element by element (V = T). A block per routed row read each token's row K
// times. ----
template <class T, class V>
__global__ void permute_rows_kernel(const T* src, const int32_t* send_pos, int64_t K, int64_t H,
                                    int64_t T_, T* dst) {
  const int64_t n = H * int64_t(sizeof(T)) / int64_t(sizeof(V));  // vectors a row
  const V* s = reinterpret_cast<const V*>(src);
  V* d = reinterpret_cast<V*>(dst);
  for (int64_t t = blockIdx.x; t < T_; t += gridDim.x)
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const V v = s[t * n + j];
      for (int64_t k = 0; k < K; ++k) {
        const int64_t row = send_pos[t * K + k];
        if (row >= 0) d[row * n + j] = v;
      }
    }
}

// ---- regroup: one block per row. ----
// Block b = s*E_local + l: offsets[b] in source-rank-major order, offsets[nb + b] in
// expert-major order; prefix sums over the same counts, each expert's rows rounded up to a
// multiple of align, as in expert_major_offsets (core/layout.h). One block of kThreads.
__global__ void regroup_offsets_kernel(const int32_t* counts, int64_t ep, int64_t El, int64_t align,
                                       int64_t* offsets) {
  const int64_t nb = ep * El;
  block_exclusive_scan(
      nb, [&](int64_t b) { return int64_t(counts[b]); },
      [&](int64_t b, int64_t before) { offsets[b] = before; });
  // Expert l's padded rows; then its sources' blocks one after another from its start.
  auto rows_of = [&](int64_t l) {
    int64_t n = 0;
    for (int64_t s = 0; s < ep; ++s) n += counts[s * El + l];
    return (n + align - 1) / align * align;
  };
  block_exclusive_scan(El, rows_of, [&](int64_t l, int64_t start) {
    for (int64_t s = 0; s < ep; ++s) {
      offsets[nb + s * El + l] = start;
      start += counts[s * El + l];
    }
  });
}

// Rows [begin, end) of dst [., H] zeroed by the blocks of one grid row: blockIdx.y's, then every
// gridDim.y-th after it (an expert's padding, at most align - 1 rows).
template <class T>
__device__ void zero_rows(T* dst, int64_t H, int64_t begin, int64_t end) {
  for (int64_t r = begin + blockIdx.y; r < end; r += gridDim.y) zero_row(dst + r * H, H);
}

// The padding rows of local expert blockIdx.x, between its last block's end and the next multiple
// of align, must be zeros: the GEMMs run over them and the weight gradients sum over them. Its
// first block (s = 0) starts the expert; its last (s = ep - 1) ends the rows.
template <class T>
__global__ void regroup_zero_padding_kernel(const int32_t* counts, const int64_t* offsets,
                                            int64_t ep, int64_t El, int64_t H, int64_t align,
                                            T* dst) {
  const int64_t l = blockIdx.x, nb = ep * El, last = (ep - 1) * El + l;
  const int64_t start = offsets[nb + l], end = offsets[nb + last] + counts[last];
  zero_rows(dst, H, end, start + (end - start + align - 1) / align * align);
}

// Expert blockIdx.x's padding rows (the block table's rows and offsets).
template <class T>
__global__ void zero_expert_padding_kernel(const int32_t* rows, const int64_t* offsets, int64_t H,
                                           T* dst) {
  const int64_t l = blockIdx.x;
  zero_rows(dst, H, offsets[l] + rows[l], offsets[l + 1]);
}

template <class T>
__global__ void regroup_rows_kernel(const T* src, const int32_t* counts, const int64_t* offsets,
                                    int64_t nb, int64_t H, int64_t rows_bound, bool to_expert_major,
                                    T* dst) {
  // The rows are the counts' sum, known here only: the grid was sized by the bound.
  const int64_t rows = min(rows_bound, offsets[nb - 1] + int64_t(counts[nb - 1]));
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    // i is a row in source-rank-major order: find its block by binary search.
    int64_t lo = last_at_or_below(offsets, nb, i);
    while (counts[lo] == 0 || i >= offsets[lo] + counts[lo]) ++lo;  // skip empty blocks
    const int64_t j = offsets[nb + lo] + (i - offsets[lo]);
    if (to_expert_major)
      copy_row(dst + j * H, src + i * H, H);
    else
      copy_row(dst + i * H, src + j * H, H);
  }
}

// Destination row i of the merged layout: the block whose merged rows hold it (the blocks' merged
// starts ascend: last_at_or_below finds it), or an expert's padding after its blocks (zeros).
__global__ void gather_chunk_rows_kernel(const int64_t* offsets, const int64_t* blocks, int64_t n,
                                         int64_t El, int64_t rows_bound, const uint8_t* src,
                                         int64_t row_bytes, uint8_t* dst) {
  const int64_t* from = blocks;
  const int64_t* at = blocks + n;
  const int64_t* rows = blocks + 2 * n;
  const int64_t end = min(rows_bound, offsets[El]);
  for (int64_t i = blockIdx.x; i < end; i += gridDim.x) {
    const int64_t b = last_at_or_below(at, n, i);
    uint8_t* to = dst + i * row_bytes;
    if (i < at[b] + rows[b]) {
      copy_row(to, src + (from[b] + i - at[b]) * row_bytes, row_bytes);
    } else if (row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(to) % 16 == 0) {
      for (int64_t j = threadIdx.x; j < row_bytes / 16; j += blockDim.x)
        reinterpret_cast<uint4*>(to)[j] = make_uint4(0, 0, 0, 0);
    } else {
      for (int64_t j = threadIdx.x; j < row_bytes; j += blockDim.x) to[j] = 0;
    }
  }
}

// One row to up to kMaxWindowRanks places (nullptr: not there), as the nvlink dispatcher's row
// moves need: the block reads the row once, kUnroll 16-byte vectors a thread at a time, and
// stores each to every place. Four loads in flight a thread before the stores were expected to
// help over NVLink and measured level with one (DeepSeek-V3 at EP 2: 327.7 -> 325.6 GB/s,
// results/2026-11-27-nvlink); the row is read once whatever the number of places. Rows whose
// bytes or places do not take 16-byte moves go byte by byte.
constexpr int kRowMoveThreads = 128, kUnroll = 4;

__device__ inline void copy_row_to(const uint8_t* __restrict__ src, int64_t row_bytes,
                                   uint8_t* const* to, int n_to) {
  bool vec = row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0;
  for (int r = 0; r < n_to; ++r) vec = vec && reinterpret_cast<uintptr_t>(to[r]) % 16 == 0;
  if (!vec) {
    for (int64_t j = threadIdx.x; j < row_bytes; j += blockDim.x) {
      const uint8_t b = src[j];
      for (int r = 0; r < n_to; ++r)
        if (to[r]) to[r][j] = b;
    }
    return;
  }
  const int64_t n = row_bytes / 16;
  const uint4* s = reinterpret_cast<const uint4*>(src);
  for (int64_t j0 = threadIdx.x; j0 < n; j0 += int64_t(blockDim.x) * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t j = j0 + int64_t(u) * blockDim.x;
      if (j < n) v[u] = __ldg(s + j);
    }
    for (int r = 0; r < n_to; ++r) {
      if (!to[r]) continue;
      uint4* d = reinterpret_cast<uint4*>(to[r]);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t j = j0 + int64_t(u) * blockDim.x;
        if (j < n) d[j] = v[u];
      }
    }
  }
}

// Token t's row to every rank that takes some of its rows, read once.
__global__ void rows_to_ranks_kernel(const uint8_t* src, int64_t row_bytes, const int32_t* wire_pos,
                                     int64_t T, int64_t ep, int64_t first_row, RankPointers to) {
  for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
    uint8_t* at[kMaxWindowRanks];
    for (int64_t r = 0; r < ep; ++r)
      at[r] = wire_pos[t * ep + r] < 0
                  ? nullptr
                  : static_cast<uint8_t*>(to.at[r]) + (first_row + t) * row_bytes;
    copy_row_to(src + t * row_bytes, row_bytes, at, int(ep));
  }
}

// Block b takes token b / ep of source b % ep: the blocks in flight write to every source at
// once, not one peer's NVLink at a time (source by source, DeepSeek-V3's sums back at ep 4 ran at
// 175-194 GB/s, interleaved at 281-317: results/2026-11-27-nvlink).
__global__ void rows_to_sources_kernel(const uint8_t* src, int64_t row_bytes,
                                       const int32_t* wire_pos_all, int64_t T, int64_t ep,
                                       int64_t me, RankPointers to) {
  for (int64_t b = blockIdx.x; b < ep * T; b += gridDim.x) {
    const int64_t g = (b % ep) * T + b / ep;
    const int32_t row = wire_pos_all[g * ep + me];
    if (row < 0) continue;
    uint8_t* at = static_cast<uint8_t*>(to.at[g / T]) + int64_t(row) * row_bytes;
    copy_row_to(src + g * row_bytes, row_bytes, &at, 1);
  }
}

}  // namespace

void gather_chunk_rows(const int64_t* offsets, const int64_t* blocks, int64_t C, int64_t ep,
                       int64_t E_local, int64_t rows_bound, const void* src, size_t row_bytes,
                       void* dst, cudaStream_t stream) {
  const int64_t n = merged_chunk_blocks(C, ep, E_local);
  if (rows_bound == 0 || n == 0) return;
  gather_chunk_rows_kernel<<<row_grid(rows_bound), 128, 0, stream>>>(
      offsets, blocks, n, E_local, rows_bound, static_cast<const uint8_t*>(src), int64_t(row_bytes),
      static_cast<uint8_t*>(dst));
  CUDA_CHECK(cudaGetLastError());
}

void permute_rows(const void* src, const int32_t* send_pos, int64_t T, int64_t K, int64_t H,
                  DType dtype, void* dst, cudaStream_t stream) {
  if (T * K == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    auto* k = rows_take_pack16<S>(H, {src, dst}) ? permute_rows_kernel<S, uint4>
                                                 : permute_rows_kernel<S, S>;
    k<<<row_grid(T), 128, 0, stream>>>(static_cast<const S*>(src), send_pos, K, H, T,
                                       static_cast<S*>(dst));
  });
  CUDA_CHECK(cudaGetLastError());
}

void regroup_rows(const void* src, const int32_t* counts, int64_t ep, int64_t E_local, int64_t H,
                  int64_t align, int64_t rows_bound, bool to_expert_major, DType dtype,
                  int64_t* block_offsets, void* dst, cudaStream_t stream) {
  MOE_CHECK(align >= 1, "regroup_rows: align " << align);
  regroup_offsets_kernel<<<1, kThreads, 0, stream>>>(counts, ep, E_local, align, block_offsets);
  CUDA_CHECK(cudaGetLastError());
  if (rows_bound == 0 || ep * E_local == 0) return;  // no rows: no padding either
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    if (to_expert_major && align > 1) {
      const dim3 grid(unsigned(E_local), unsigned(std::min<int64_t>(align - 1, 64)));
      regroup_zero_padding_kernel<<<grid, 128, 0, stream>>>(counts, block_offsets, ep, E_local, H,
                                                            align, static_cast<S*>(dst));
    }
    regroup_rows_kernel<<<row_grid(rows_bound), 128, 0, stream>>>(
        static_cast<const S*>(src), counts, block_offsets, ep * E_local, H, rows_bound,
        to_expert_major, static_cast<S*>(dst));
  });
  CUDA_CHECK(cudaGetLastError());
}

void zero_expert_padding(const int32_t* rows, const int64_t* offsets, int64_t E_local, int64_t H,
                         int64_t align, DType dtype, void* expert_major, cudaStream_t stream) {
  if (align <= 1 || E_local == 0) return;  // no padding rows
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    const dim3 grid(unsigned(E_local), unsigned(std::min<int64_t>(align - 1, 64)));
    zero_expert_padding_kernel<<<grid, 128, 0, stream>>>(rows, offsets, H,
                                                         static_cast<S*>(expert_major));
  });
  CUDA_CHECK(cudaGetLastError());
}

void rows_to_ranks(const void* src, size_t row_bytes, const int32_t* wire_pos, int64_t T,
                   int64_t ep, int64_t first_row, const RankPointers& to, cudaStream_t stream) {
  if (T * ep == 0 || row_bytes == 0) return;
  rows_to_ranks_kernel<<<row_grid(T), kRowMoveThreads, 0, stream>>>(
      static_cast<const uint8_t*>(src), int64_t(row_bytes), wire_pos, T, ep, first_row, to);
  CUDA_CHECK(cudaGetLastError());
}

void rows_to_sources(const void* src, size_t row_bytes, const int32_t* wire_pos_all, int64_t T,
                     int64_t ep, int64_t me, const RankPointers& to, cudaStream_t stream) {
  if (T * ep == 0 || row_bytes == 0) return;
  rows_to_sources_kernel<<<row_grid(T * ep), kRowMoveThreads, 0, stream>>>(
      static_cast<const uint8_t*>(src), int64_t(row_bytes), wire_pos_all, T, ep, me, to);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace moe::cuda
