#pragma once
// Moving token rows between orders: token order -> send order (permute), and, on the receiving
// rank, source-rank-major <-> expert-major (regroup), so that each local expert's rows are
// contiguous for its GEMMs.
#include <cstddef>
#include <cstdint>

namespace moe::cpu {

// dst [rows sent, H]: dst[send_pos[t*K + k]] = src[t] for src [T, H]; send_pos -1 (dropped) skips.
void permute_rows(const float* src, const int32_t* send_pos, int64_t T, int64_t K, int64_t H,
                  float* dst);

// counts [ep, E_local] int32: rows source rank s sent for local expert l. Source-rank-major order
// holds, for s = 0..ep-1, its rows for l = 0..E_local-1; expert-major holds, for each l, the rows
// from s = 0..ep-1, then zero rows up to a multiple of `align` (expert_major_offsets). The
// direction is to_expert_major; source-rank-major is [R, H], R = sum(counts), expert-major
// [R + padding, H].
void regroup_rows(const float* src, const int32_t* counts, int64_t ep, int64_t E_local, int64_t H,
                  int64_t align, bool to_expert_major, float* dst);

// Zeros local expert l's padding rows [offsets[l] + rows[l], offsets[l + 1]) of expert_major
// [., H], l < E_local: the GEMMs run over them and the weight gradients sum over them.
void zero_expert_padding(const int32_t* rows, const int64_t* offsets, int64_t E_local, int64_t H,
                         float* expert_major);

// dst [offsets[E_local], row_bytes]: the rows of src [., row_bytes] where core/layout.h
// merged_chunk_layout's blocks (chunks C, ep, E_local) put them; each expert's padding rows,
// after its blocks, zeros. Rows are moved as bytes (they may be packed FP8 rows).
void gather_chunk_rows(const int64_t* offsets, const int64_t* blocks, int64_t C, int64_t ep,
                       int64_t E_local, const void* src, size_t row_bytes, void* dst);

// The nvlink dispatcher's row moves (core/ops.h Ops::rows_to_ranks, rows_to_sources), as bytes:
// row t of src [T, row_bytes] to to[r] at row first_row + t for each r < ep with
// wire_pos[t * ep + r] >= 0; and row g of src [ep * T, row_bytes] to to[g / T] at row
// wire_pos_all[g * ep + me] where that is >= 0.
void rows_to_ranks(const void* src, size_t row_bytes, const int32_t* wire_pos, int64_t T,
                   int64_t ep, int64_t first_row, void* const* to);
void rows_to_sources(const void* src, size_t row_bytes, const int32_t* wire_pos_all, int64_t T,
                     int64_t ep, int64_t me, void* const* to);

}  // namespace moe::cpu
