#pragma once
// FP8 (OCP E4M3) quantization of the expert GEMMs' operands, exactly as ../shared/MATH.md
// defines it ("FP8 expert GEMMs"): a block's scale is its amax / 448 in fp32 (1 for an all-zero
// block), and each value becomes scale * e4m3(value / scale). The CPU backend and the reference
// quantize through these functions; a CUDA quantization kernel is tested against them.
#include <cmath>
#include <cstdint>

#include "core/grouped_gemm.h"
#include "core/hd.h"
#include "core/workload.h"

namespace moe {

// How an operand is cut into blocks that share one scale.
enum class Fp8Recipe {
  // The whole operand of one expert's GEMM is one block (per-tensor current scaling, as
  // TransformerEngine and Megatron-Core train).
  kTensor,
  // DeepSeek-V3's recipe: activations and gradients in 1 x 128 blocks along the GEMM's reduction
  // dimension (128 x 1 down the rows for a weight gradient's operands), weights in 128 x 128.
  kBlock,
};

// The recipe of an FP8 precision; refuses Precision::kBf16.
Fp8Recipe fp8_recipe_of(Precision precision);

constexpr float kE4m3Max = 448.0f;  // the largest finite E4M3 value
constexpr int64_t kFp8Block = 128;  // the block recipe's block edge
// The most groups (local experts) one CUDA quantization call takes: its blocks keep a table of
// the groups in shared memory (kernels/cuda/fp8_quantize.cu).
constexpr int64_t kFp8CudaMaxGroups = 8192;

// v rounded to nearest, ties to even, on the E4M3 grid (3 mantissa bits, exponent bias 7,
// subnormals down to 2^-9), saturating to +-448: finite input never gives NaN or Inf.
float e4m3_round(float v);

// The scale of a block whose largest magnitude is amax: amax / 448 in fp32, or 1 when amax is 0.
float fp8_scale(float amax);

// scale * e4m3(v / scale), in fp32.
float fp8_quantize(float v, float scale);

// v / scale from inv = 1 / scale (rounded to fp32) and one correction step (Markstein's): the
// division's own result wherever it is a normal float, so the same e4m3 value for every bf16 v
// and every scale (tests/cpu/test_fp8.cpp checks it), but a multiply and two FMAs where a block
// of values shares one scale, against a division's dozen instructions on the GPU. Tiny values and
// subnormal scales, where the correction's residual would underflow, take the division.
constexpr float kFp8TinyValue = 0x1p-96f, kFp8TinyScale = 0x1p-126f;
// The correction alone, for v = 0 or |v| >= kFp8TinyValue and scale >= kFp8TinyScale (a block
// known to hold no tiny value takes it without a branch per value): the division's e4m3 value,
// except that -0 gives +0 (the same value).
MOE_HD inline float fp8_quotient_normal(float v, float scale, float inv) {
  const float q = v * inv;
  return fmaf(fmaf(-q, scale, v), inv, q);
}
MOE_HD inline float fp8_quotient(float v, float scale, float inv) {
  if (fabsf(v) < kFp8TinyValue || scale < kFp8TinyScale) return v / scale;
  return fp8_quotient_normal(v, scale, inv);
}

// The OCP E4M3 encoding of a value on the grid (e4m3_round's results: |q| <= 448), and back.
uint8_t e4m3_bits(float q);
float e4m3_from_bits(uint8_t bits);

// dispatch_dtype fp8 (MATH.md): a token's row of H values as it crosses the wire and lands with
// the experts, quantized in the block recipe's 1 x 128 blocks along H: H e4m3 codes (one byte
// each), then ceil(H / 128) fp32 scales from byte fp8_row_scales_at(H), zeros up to
// fp8_row_bytes(H), a multiple of 16 so that every row, its codes and its scales start 16-byte
// aligned where the first row does (every CUDA kernel and cuBLASLt read them there).
MOE_HD inline int64_t fp8_row_scales_at(int64_t H) { return (H + 15) / 16 * 16; }
MOE_HD inline int64_t fp8_row_bytes(int64_t H) {
  return (fp8_row_scales_at(H) + 4 * ((H + kFp8Block - 1) / kFp8Block) + 15) / 16 * 16;
}
// x [n, H] (bf16 values, as floats) -> packed [n, fp8_row_bytes(H)]: each row's codes and scales,
// whose values are fp8_quantize_along_rows(kBlock)'s bit for bit.
void fp8_pack_rows(const float* x, int64_t n, int64_t H, uint8_t* packed);
// packed [n, fp8_row_bytes(H)] -> values [n, H]: scale * code in fp32, the quantized values.
void fp8_unpack_rows(const uint8_t* packed, int64_t n, int64_t H, float* values);

// One tensor of n values as per-tensor scaling takes it: its amax, its scale (fp8_scale of it), and
// its values quantized in place with a scale. Large tensors in parts of kFp8TensorPart values,
// one a thread (a max and an element-wise map: the same result however cut).
constexpr int64_t kFp8TensorPart = int64_t(1) << 20;
float fp8_tensor_amax(const float* X, int64_t n);
float fp8_tensor_scale(const float* X, int64_t n);
void fp8_quantize_tensor(float* X, int64_t n, float scale);

// In place, the operand X stored [rows, cols], reduced over its columns (each row's values meet
// one row of the other operand): one block (kTensor) or 1 x 128 blocks along each row (kBlock).
// Activations and gradients that multiply weights.
void fp8_quantize_along_rows(float* X, int64_t rows, int64_t cols, Fp8Recipe recipe);

// In place, the operand X stored [rows, cols] reduced over its rows (a weight gradient's
// operands): one block, or 128 x 1 blocks down each column, starting at X's first row.
void fp8_quantize_down_columns(float* X, int64_t rows, int64_t cols, Fp8Recipe recipe);

// In place, one expert's weight W stored [rows, cols]: one block, or 128 x 128 blocks from W's
// first row and column.
void fp8_quantize_weight(float* W, int64_t rows, int64_t cols, Fp8Recipe recipe);

// How one expert's GEMM of `layout` quantizes each operand (core/grouped_gemm.h's shapes):
// A [rows, K] and B ([K, N] or [N, K]) for the row layouts, A [rows, M] and B [rows, N] for the
// weight gradients. Copies of one group's operands go in; they come out quantized. A null A is
// quantized already (dispatch_dtype fp8's rows) and stays as it is.
void fp8_quantize_group_operands(GroupedLayout layout, int64_t rows, int64_t M, int64_t N,
                                 int64_t K, float* A, float* B, Fp8Recipe recipe);

}  // namespace moe
