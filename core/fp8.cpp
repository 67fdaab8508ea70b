#include "core/fp8.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"

namespace moe {

Fp8Recipe fp8_recipe_of(Precision precision) {
  MOE_CHECK(precision != Precision::kBf16, "fp8_recipe_of: precision bf16 has no FP8 recipe");
  return precision == Precision::kFp8Tensor ? Fp8Recipe::kTensor : Fp8Recipe::kBlock;
}

float e4m3_round(float v) {
  const float a = std::fabs(v);
  if (!(a < kE4m3Max)) return std::copysign(kE4m3Max, v);  // saturate (NaN too: never produced)
  // The grid's spacing at a: 2^(e - 3) for a in [2^e, 2^(e + 1)) with e >= -6 (normals), 2^-9
  // below 2^-6 (subnormals). Below 2^-6 scaling by 2^9 is exact, so nearbyint (ties to even in
  // the default rounding mode) rounds on the grid. From 2^-6 up, a keeps 3 of its float's 23
  // mantissa bits, rounded to nearest even on its bits (a carry into the exponent gives
  // 2^(e + 1), on the grid too). Bit operations rather than frexp / ldexp, which made this a
  // third of the host's FP8 time: the same result for every one of the 2^32 floats (checked
  // exhaustively against the frexp / ldexp form when it replaced it, 2026-11-27).
  float q;
  if (a < 0x1p-6f) {
    q = std::nearbyint(a * 0x1p9f) * 0x1p-9f;
  } else {
    uint32_t b;
    std::memcpy(&b, &a, 4);
    b = (b + 0x7ffffu + ((b >> 20) & 1u)) & ~0xfffffu;
    std::memcpy(&q, &b, 4);
  }
  return std::copysign(std::min(q, kE4m3Max), v);
}

float fp8_scale(float amax) { return amax > 0.0f ? amax / kE4m3Max : 1.0f; }

float fp8_quantize(float v, float scale) { return scale * e4m3_round(v / scale); }

uint8_t e4m3_bits(float q) {
  const uint8_t sign = std::signbit(q) ? 0x80 : 0x00;
  const float a = std::fabs(q);
  if (a < 0x1p-6f) return uint8_t(sign | uint8_t(a * 0x1p9f));  // subnormal: m * 2^-9
  int exp = 0;
  const float f = std::frexp(a, &exp);  // a = f * 2^exp, f in [0.5, 1): exponent field exp + 6
  return uint8_t(sign | uint8_t((exp + 6) << 3) | uint8_t((f * 2.0f - 1.0f) * 8.0f));
}

float e4m3_from_bits(uint8_t bits) {
  const int e = (bits >> 3) & 15, m = bits & 7;
  const float a = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.0f + float(m) / 8.0f, e - 7);
  return bits & 0x80 ? -a : a;
}

void fp8_pack_rows(const float* x, int64_t n, int64_t H, uint8_t* packed) {
  const int64_t row_bytes = fp8_row_bytes(H), scales_at = fp8_row_scales_at(H);
  for (int64_t r = 0; r < n; ++r) {
    uint8_t* row = packed + r * row_bytes;
    std::fill(row, row + row_bytes, uint8_t(0));
    for (int64_t c0 = 0; c0 < H; c0 += kFp8Block) {
      const int64_t c1 = std::min(H, c0 + kFp8Block);
      float amax = 0.0f;
      for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(x[r * H + c]));
      const float scale = fp8_scale(amax);
      for (int64_t c = c0; c < c1; ++c) row[c] = e4m3_bits(e4m3_round(x[r * H + c] / scale));
      std::memcpy(row + scales_at + 4 * (c0 / kFp8Block), &scale, 4);
    }
  }
}

void fp8_unpack_rows(const uint8_t* packed, int64_t n, int64_t H, float* values) {
  const int64_t row_bytes = fp8_row_bytes(H), scales_at = fp8_row_scales_at(H);
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = packed + r * row_bytes;
    for (int64_t c = 0; c < H; ++c) {
      float scale;
      std::memcpy(&scale, row + scales_at + 4 * (c / kFp8Block), 4);
      values[r * H + c] = scale * e4m3_from_bits(row[c]);
    }
  }
}

namespace {

// Quantizes the block of X [r0, r1) x [c0, c1) (row stride ld) with one scale.
void quantize_block(float* X, int64_t ld, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  float amax = 0.0f;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(X[r * ld + c]));
  const float scale = fp8_scale(amax);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = c0; c < c1; ++c) X[r * ld + c] = fp8_quantize(X[r * ld + c], scale);
}

// Blocks of block_rows x block_cols from X's first row and column (a last partial block is a
// block), or, per tensor, X whole as one block. Large tensors (a model's expert weights in the
// float64 reference: DeepSeek-V3's 256 experts hold 11 G values) are cut into parts of whole row
// blocks, one a thread: each block's values and scale are the same however it is cut (the
// per-tensor amax is a max).
void quantize_blocks(float* X, int64_t rows, int64_t cols, Fp8Recipe recipe, int64_t block_rows,
                     int64_t block_cols) {
  constexpr int64_t kPerPart = int64_t(1) << 20;
  if (recipe == Fp8Recipe::kTensor) {
    fp8_quantize_tensor(X, rows * cols, fp8_tensor_scale(X, rows * cols));
    return;
  }
  const int64_t row_blocks = (rows + block_rows - 1) / block_rows;
  const int parts = part_count_of_units(row_blocks, rows * cols, kPerPart);
  for_each_part(row_blocks, parts, [&](int, int64_t b0, int64_t b1) {
    for (int64_t r = b0 * block_rows; r < std::min(rows, b1 * block_rows); r += block_rows)
      for (int64_t c = 0; c < cols; c += block_cols)
        quantize_block(X, cols, r, std::min(rows, r + block_rows), c,
                       std::min(cols, c + block_cols));
  });
}

}  // namespace

float fp8_tensor_amax(const float* X, int64_t n) {
  const int parts = part_count(n, kFp8TensorPart);
  std::vector<float> amax(parts, 0.0f);
  for_each_part(n, parts, [&](int part, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) amax[part] = std::max(amax[part], std::fabs(X[i]));
  });
  return *std::max_element(amax.begin(), amax.end());
}

float fp8_tensor_scale(const float* X, int64_t n) { return fp8_scale(fp8_tensor_amax(X, n)); }

void fp8_quantize_tensor(float* X, int64_t n, float scale) {
  for_each_part(n, part_count(n, kFp8TensorPart), [&](int, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) X[i] = fp8_quantize(X[i], scale);
  });
}

void fp8_quantize_along_rows(float* X, int64_t rows, int64_t cols, Fp8Recipe recipe) {
  quantize_blocks(X, rows, cols, recipe, 1, kFp8Block);
}

void fp8_quantize_down_columns(float* X, int64_t rows, int64_t cols, Fp8Recipe recipe) {
  quantize_blocks(X, rows, cols, recipe, kFp8Block, 1);
}

void fp8_quantize_weight(float* W, int64_t rows, int64_t cols, Fp8Recipe recipe) {
  quantize_blocks(W, rows, cols, recipe, kFp8Block, kFp8Block);
}

void fp8_quantize_group_operands(GroupedLayout layout, int64_t rows, int64_t M, int64_t N,
                                 int64_t K, float* A, float* B, Fp8Recipe recipe) {
  switch (layout) {
    case GroupedLayout::kRowsTimesWeight:  // A [rows, K] @ B [K, N]
      if (A) fp8_quantize_along_rows(A, rows, K, recipe);
      fp8_quantize_weight(B, K, N, recipe);
      break;
    case GroupedLayout::kRowsTimesWeightT:  // A [rows, K] @ (B [N, K])^T
      if (A) fp8_quantize_along_rows(A, rows, K, recipe);
      fp8_quantize_weight(B, N, K, recipe);
      break;
    case GroupedLayout::kRowsTTimesRows:  // (A [rows, M])^T @ B [rows, N]
      if (A) fp8_quantize_down_columns(A, rows, M, recipe);
      fp8_quantize_down_columns(B, rows, N, recipe);
      break;
  }
}

}  // namespace moe
