#pragma once
// CUDA twin of core/fp8.h: the expert GEMMs' bf16 operands quantized to FP8 E4M3 on the GPU with
// the same arithmetic (scale = amax / 448 in fp32, 1 for an all-zero block; e4m3(v / scale) by the
// hardware's round-to-nearest-even saturating conversion), so the values match the host's bit for
// bit, in the layouts cuBLASLt's FP8 matmul reads on Hopper: both operands K-major, 1 x 128 scales
// "rows-inner", 128 x 128 scales row-major over the tiles (results/2026-11-25-fp8-cublaslt-probe).
// One kernel does every case: a 128 x 128 tile through shared memory in 16-byte loads, its codes
// written as stored and/or transposed in 8-byte stores, so that an operand read once gives both
// orientations its GEMMs need (a weight's forward and backward, a gradient's data and weight
// GEMMs), as TransformerEngine's "rowwise and columnwise" data. Per-tensor amaxes are reduced with
// integer atomicMax on the float bits: a maximum does not depend on the order its parts arrive in,
// so the results are deterministic. Codes are stored as uint8 (an __nv_fp8_e4m3's bits). Row
// lengths must be multiples of 8. Every function runs on `stream`.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/fp8.h"
#include "core/fp8_buffers.h"

namespace moe::cuda {

// The sizes and strides of FP8 operands and their scales (core/fp8_buffers.h).
using moe::cols_fp8_scale_bound;
using moe::kTensorScaleStride;
using moe::weight_fp8_scale_stride;
using moe::weight_fp8_tiles_ld;

// An operand X [R, K] bf16 in expert-major groups, group g owning rows [offsets[g], offsets[g + 1])
// (device offsets, G + 1; rows_bound >= offsets[G] sizes the grid), quantized for the GEMMs it
// meets (either output may be null):
// - as stored, where the reduction runs along each row (X times a weight): q [R, K] gets the
//   codes. scales: kTensor, one per group at scales[kTensorScaleStride * g]; kBlock, 1 x 128
//   blocks along each row, group g's ceil(K / 128) * n_g scales from scales + ceil(K / 128) *
//   offsets[g], block kb of its row r at kb * n_g + r (n_g its rows).
// - transposed, where the reduction runs down the rows (a weight gradient's operand): qt [K, ld]
//   gets the codes (group g's rows become columns [offsets[g], offsets[g + 1]) of every row of qt;
//   ld >= offsets[G]). scales_t: kTensor as above; kBlock, 128 x 1 blocks down each group's rows
//   from its first, group g's K * ceil(n_g / 128) scales from scales_t + K * sum_{h < g}
//   ceil(n_h / 128), block kb of column k at kb * K + k.
// amax_ready (kTensor only): the scales (scales_t where q is null) already hold each group's amax
// as float bits, max-ed there by the kernel that wrote X (swiglu_fwd/bwd's GroupAmax); they
// become the scales, and X is read once, not twice.
void quantize_rows_and_cols_fp8(const void* X, const int64_t* offsets, int64_t G,
                                int64_t rows_bound, int64_t K, Fp8Recipe recipe, uint8_t* q,
                                float* scales, uint8_t* qt, int64_t ld, float* scales_t,
                                cudaStream_t stream, bool amax_ready = false);
// The as-stored half alone, and the transposed half alone.
void quantize_rows_fp8(const void* X, const int64_t* offsets, int64_t G, int64_t rows_bound,
                       int64_t K, Fp8Recipe recipe, uint8_t* q, float* scales, cudaStream_t stream);
void quantize_cols_fp8(const void* X, const int64_t* offsets, int64_t G, int64_t rows_bound,
                       int64_t K, Fp8Recipe recipe, uint8_t* qt, int64_t ld, float* scales_t,
                       cudaStream_t stream);

// Scales a transposed kBlock operand needs at most: core/fp8_buffers.h cols_fp8_scale_bound.

// Weights W [G, P, Q] bf16, both ways round in one pass (either output may be null): q gets each
// expert's codes as stored [P, Q] (the GEMM's B [N, K] with N = P) and qt transposed [Q, P].
// scales, scales_t: kTensor as above (the same values); kBlock, one per 128 x 128 tile, expert g's
// from + g * weight_fp8_scale_stride(P, Q), tile (nb, kb) of that orientation's [N, K] at
// nb * ld + kb with ld = weight_fp8_tiles_ld(K) (core/fp8_buffers.h; cuBLASLt's BLK128x128_32F
// layout on Hopper: results/2026-11-25-fp8-cublaslt-probe).
void quantize_weight_fp8(const void* W, int64_t G, int64_t P, int64_t Q, Fp8Recipe recipe,
                         uint8_t* q, float* scales, uint8_t* qt, float* scales_t,
                         cudaStream_t stream);

// dispatch_dtype fp8: rows of x [n, H] bf16 -> packed [n, fp8_row_bytes(H)] (core/fp8.h
// fp8_pack_rows, bit for bit). H a multiple of 16.
void pack_fp8_rows(const void* x, int64_t n, int64_t H, void* packed, cudaStream_t stream);
// Expert-major packed rows, G groups at device offsets (rows_bound >= offsets[G] sizes the grid),
// as the up projection's operand, as quantize_rows_fp8 (kBlock) lays out its codes q [., H] and
// scales: the packed codes and scales as they are, no new quantization.
void fp8_rows_to_gemm(const void* packed, const int64_t* offsets, int64_t G, int64_t rows_bound,
                      int64_t H, uint8_t* q, float* scales, cudaStream_t stream);
// The same rows as a weight gradient's operand: quantize_cols_fp8 (kBlock) of the bf16 values
// the packed rows hold (scale * code rounded to bf16: core/fp8.h fp8_unpack_rows, then bf16),
// read from the packed rows in the same pass.
void quantize_packed_cols_fp8(const void* packed, const int64_t* offsets, int64_t G,
                              int64_t rows_bound, int64_t K, uint8_t* qt, int64_t ld,
                              float* scales_t, cudaStream_t stream);

}  // namespace moe::cuda
