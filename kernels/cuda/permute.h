#pragma once
// CUDA twin of kernels/cpu/permute.h: rows into send order, and source-rank-major <-> expert-major
// (regroup). Same names, argument order and results as the twin; storage tensors are bf16 or fp32
// per `dtype`; all launches go on `stream`.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/mesh.h"
#include "core/workload.h"

namespace moe::cuda {

// A row with send_pos -1 (dropped by the capacity) is not moved.
void permute_rows(const void* src, const int32_t* send_pos, int64_t T, int64_t K, int64_t H,
                  DType dtype, void* dst, cudaStream_t stream);
// counts [ep, E_local] i32 on the device; their sum, read there, is the rows of the
// source-rank-major side, and rows_bound (host) at least that: it sizes the grid. The
// expert-major side has expert_major_offsets' rows (core/layout.h), padding included
// (zero-filled when to_expert_major, skipped otherwise). block_offsets is device scratch of
// 2 * ep * E_local int64.
void regroup_rows(const void* src, const int32_t* counts, int64_t ep, int64_t E_local, int64_t H,
                  int64_t align, int64_t rows_bound, bool to_expert_major, DType dtype,
                  int64_t* block_offsets, void* dst, cudaStream_t stream);

// Zeros local expert l's padding rows [offsets[l] + rows[l], offsets[l + 1]) of expert_major
// [., H], l < E_local; rows [E_local] i32 and offsets [E_local + 1] i64 on the device, at most
// align - 1 padding rows per expert.
void zero_expert_padding(const int32_t* rows, const int64_t* offsets, int64_t E_local, int64_t H,
                         int64_t align, DType dtype, void* expert_major, cudaStream_t stream);

// dst [offsets[E_local], row_bytes] = src's rows where core/layout.h merged_chunk_layout's blocks
// (C chunks, ep, E_local; device memory, as offsets) put them, each expert's padding rows zeros.
// rows_bound >= offsets[E_local] (read on the device) sizes the grid. Rows move as bytes.
void gather_chunk_rows(const int64_t* offsets, const int64_t* blocks, int64_t C, int64_t ep,
                       int64_t E_local, int64_t rows_bound, const void* src, size_t row_bytes,
                       void* dst, cudaStream_t stream);

// The nvlink dispatcher's row moves (kernels/cpu/permute.h, same arguments), writing other GPUs'
// memory through its peer mappings; each row moves as bytes, 16 at a time where it allows.
struct RankPointers {
  void* at[kMaxWindowRanks];
};
void rows_to_ranks(const void* src, size_t row_bytes, const int32_t* wire_pos, int64_t T,
                   int64_t ep, int64_t first_row, const RankPointers& to, cudaStream_t stream);
void rows_to_sources(const void* src, size_t row_bytes, const int32_t* wire_pos_all, int64_t T,
                     int64_t ep, int64_t me, const RankPointers& to, cudaStream_t stream);

}  // namespace moe::cuda
