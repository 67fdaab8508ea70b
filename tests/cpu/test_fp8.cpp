// FP8 quantization (core/fp8.h) against the E4M3 grid enumerated here from its bit layout, and
// the CPU FP8 grouped GEMM against grouped_gemm of operands quantized here block by block.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "core/fp8.h"
#include "kernels/cpu/gemm.h"
#include "tests/common/expect_close.h"

namespace moe {
namespace {

// The value of E4M3 code (exponent field e 0..15, mantissa field m 0..7), positive sign; (15, 7)
// is NaN and not asked for.
float e4m3_value(int e, int m) {
  return e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
}

// Every finite positive code in increasing order, with its mantissa field.
struct Code {
  float value;
  int m;
};
std::vector<Code> positive_grid() {
  std::vector<Code> g;
  for (int e = 0; e < 16; ++e)
    for (int m = 0; m < 8; ++m)
      if (!(e == 15 && m == 7)) g.push_back({e4m3_value(e, m), m});
  return g;
}

TEST(Fp8, GridValuesAreKept) {
  const auto grid = positive_grid();
  ASSERT_EQ(grid.size(), 127u);
  EXPECT_EQ(grid.back().value, kE4m3Max);
  for (const Code& c : grid) {
    EXPECT_EQ(e4m3_round(c.value), c.value) << c.value;
    EXPECT_EQ(e4m3_round(-c.value), -c.value) << c.value;
  }
}

TEST(Fp8, BitsOfEveryFiniteCodeRoundTrip) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;  // NaN, never produced
    const float v = e4m3_from_bits(uint8_t(b));
    EXPECT_EQ(e4m3_round(v), v) << b;
    EXPECT_EQ(int(e4m3_bits(v)), b) << v;
    EXPECT_EQ(v, (b & 0x80 ? -1.0f : 1.0f) * e4m3_value((b >> 3) & 15, b & 7)) << b;
  }
  EXPECT_EQ(e4m3_from_bits(0x7e), kE4m3Max);
  EXPECT_EQ(e4m3_from_bits(0x38), 1.0f);
  EXPECT_EQ(e4m3_from_bits(0x01), std::ldexp(1.0f, -9));
}

// dispatch_dtype fp8's rows: H codes, then a scale per 1 x 128 block, zeros to a multiple of 16.
TEST(Fp8, PackedRowsHoldTheBlockQuantizationBitForBit) {
  EXPECT_EQ(fp8_row_bytes(7168), 7168 + 56 * 4);  // DeepSeek-V3: 7392 bytes against 14336 in bf16
  EXPECT_EQ(fp8_row_bytes(4096), 4096 + 32 * 4);
  EXPECT_EQ(fp8_row_bytes(208), 208 + 16);  // two blocks' scales, padded to 16
  const int64_t n = 6, H = 208, row = fp8_row_bytes(H);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(n * H);
  for (float& v : x) v = round_to_bf16(normal(rng));
  std::fill(x.begin() + 2 * H, x.begin() + 3 * H, 0.0f);  // an all-zero row: scale 1
  x[4 * H + 130] = round_to_bf16(1e-30f);                 // a tiny value beside normal ones
  std::fill(x.begin() + 5 * H + 128, x.begin() + 6 * H, round_to_bf16(1e-30f));  // a tiny block
  std::vector<uint8_t> packed(n * row, 0xab);
  fp8_pack_rows(x.data(), n, H, packed.data());
  std::vector<float> got(n * H), want = x;
  fp8_unpack_rows(packed.data(), n, H, got.data());
  fp8_quantize_along_rows(want.data(), n, H, Fp8Recipe::kBlock);
  for (int64_t i = 0; i < n * H; ++i) ASSERT_EQ(got[i], want[i]) << i;
  for (int64_t r = 0; r < n; ++r) {
    float s1;
    std::memcpy(&s1, &packed[r * row + fp8_row_scales_at(H) + 4], 4);
    float amax = 0.0f;
    for (int64_t c = 128; c < H; ++c) amax = std::max(amax, std::fabs(x[r * H + c]));
    EXPECT_EQ(s1, fp8_scale(amax)) << r;
    for (int64_t b = fp8_row_scales_at(H) + 8; b < row; ++b) EXPECT_EQ(packed[r * row + b], 0) << b;
  }
}

TEST(Fp8, RoundsToNearestTiesToEven) {
  const auto grid = positive_grid();
  for (size_t i = 0; i + 1 < grid.size(); ++i) {
    const float lo = grid[i].value, hi = grid[i + 1].value;
    const float mid = 0.5f * (lo + hi);  // exact: the grid's values have few bits
    const float even = grid[i].m % 2 == 0 ? lo : hi;
    EXPECT_EQ(e4m3_round(mid), even) << lo << " .. " << hi;
    EXPECT_EQ(e4m3_round(std::nextafter(mid, 0.0f)), lo) << lo;
    EXPECT_EQ(e4m3_round(std::nextafter(mid, 1e9f)), hi) << hi;
    EXPECT_EQ(e4m3_round(-mid), -even) << lo;
  }
  // Below the smallest subnormal 2^-9: half of it ties to 0 (even), more rounds up.
  EXPECT_EQ(e4m3_round(std::ldexp(1.0f, -10)), 0.0f);
  EXPECT_EQ(e4m3_round(std::ldexp(1.5f, -10)), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_round(1e-30f), 0.0f);
}

// Every value a bf16 operand can hold (both signs, subnormals and all; past 448 saturating) goes
// to its nearest grid value, a tie to the even code: the grid searched, not the bit arithmetic.
TEST(Fp8, EveryBf16ValueGoesToTheNearestGridValue) {
  const auto grid = positive_grid();
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint32_t bits = h << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    if (std::isnan(v)) continue;
    const float a = std::fabs(v);
    float want = 448.0f;
    if (a < 448.0f) {
      size_t i = 0;
      while (i + 1 < grid.size() && grid[i + 1].value <= a) ++i;  // grid[i] <= a
      const float lo = grid[i].value, hi = grid[i + 1].value;
      want = a - lo < hi - a ? lo : a - lo > hi - a ? hi : (grid[i].m % 2 == 0 ? lo : hi);
    }
    ASSERT_EQ(e4m3_round(v), std::copysign(want, v)) << "bf16 bits " << h;
  }
}

TEST(Fp8, SaturatesAt448) {
  for (float v : {448.0f, 449.0f, 464.0f, 479.0f, 480.0f, 1e6f, 3e38f}) {
    EXPECT_EQ(e4m3_round(v), 448.0f) << v;
    EXPECT_EQ(e4m3_round(-v), -448.0f) << v;
  }
}

TEST(Fp8, ScaleOfZeroIsOne) {
  EXPECT_EQ(fp8_scale(0.0f), 1.0f);
  EXPECT_EQ(fp8_scale(448.0f), 1.0f);
  std::vector<float> zeros(7 * 130, 0.0f);
  for (Fp8Recipe r : {Fp8Recipe::kTensor, Fp8Recipe::kBlock}) {
    fp8_quantize_along_rows(zeros.data(), 7, 130, r);
    for (float v : zeros) ASSERT_EQ(v, 0.0f);
  }
}

// The GPU's quotient (fp8_quotient: a reciprocal and one correction) gives the e4m3 value the
// division gives, for every bf16 value v up to a block's amax and amaxes across the bf16 range
// (every 61st positive finite bf16, subnormal ones included, and the extremes), both signs. Its
// fp32 result equals the division's wherever that is a normal float. The branch-free correction
// (fp8_quotient_normal) gives the same e4m3 values in its domain.
TEST(Fp8, QuotientFromTheReciprocalRoundsAsTheDivision) {
  auto bits_of = [](float f) {  // -0 and +0 apart
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  int64_t checked = 0, code_mismatches = 0, value_mismatches = 0;
  int64_t checked_normal = 0, normal_mismatches = 0;
  std::vector<uint16_t> amaxes;
  for (uint32_t b = 1; b < 0x7f80; b += 61) amaxes.push_back(uint16_t(b));
  amaxes.push_back(0x7f7f);  // the largest finite bf16
  for (uint16_t ab : amaxes) {
    const float amax = bf16_bits_to_float(ab), scale = fp8_scale(amax), inv = 1.0f / scale;
    for (uint32_t vb = 0; vb <= ab; ++vb)
      for (float v : {bf16_bits_to_float(uint16_t(vb)), -bf16_bits_to_float(uint16_t(vb))}) {
        const float want = v / scale, got = fp8_quotient(v, scale, inv);
        ++checked;
        code_mismatches += bits_of(e4m3_round(want)) != bits_of(e4m3_round(got));
        value_mismatches += std::fabs(want) >= 0x1p-126f && want != got;
        // The branch-free correction, in its domain: the same e4m3 value (a zero's sign aside).
        if (scale >= kFp8TinyScale && (v == 0.0f || std::fabs(v) >= kFp8TinyValue)) {
          ++checked_normal;
          normal_mismatches += e4m3_round(want) != e4m3_round(fp8_quotient_normal(v, scale, inv));
        }
      }
  }
  EXPECT_GT(checked, 10'000'000);
  EXPECT_EQ(code_mismatches, 0);
  EXPECT_EQ(value_mismatches, 0);
  EXPECT_GT(checked_normal, checked / 2);
  EXPECT_EQ(normal_mismatches, 0);
}

std::vector<float> random_floats(std::mt19937_64& rng, int64_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Each value of q is within half an E4M3 step (1/16 relative) of x's, where x is in the normal
// range of its block's scale; each block's largest magnitude survives (to fp32 rounding).
void expect_quantized(const std::vector<float>& x, const std::vector<float>& q) {
  ASSERT_EQ(x.size(), q.size());
  int changed = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::fabs(q[i] - x[i]), std::fabs(x[i]) / 16 + 1e-6f) << i;
    changed += q[i] != x[i];
  }
  EXPECT_GT(changed, int(x.size()) / 2);  // quantizing does change most random values
}

TEST(Fp8, BlocksAlongRowsAreIndependent) {
  std::mt19937_64 rng(1);
  const int64_t rows = 3, cols = 300;  // blocks [0, 128), [128, 256), [256, 300) per row
  const auto x = random_floats(rng, rows * cols);
  auto q = x;
  fp8_quantize_along_rows(q.data(), rows, cols, Fp8Recipe::kBlock);
  expect_quantized(x, q);
  // Scaling up one block (row 1, columns 128..255) changes no other value's quantization.
  auto y = x;
  for (int64_t c = 128; c < 256; ++c) y[1 * cols + c] *= 1000.0f;
  fp8_quantize_along_rows(y.data(), rows, cols, Fp8Recipe::kBlock);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if (!(r == 1 && c >= 128 && c < 256)) {
        ASSERT_EQ(y[r * cols + c], q[r * cols + c]);
      }
  // Per tensor, the same change moves the one scale and so the other values.
  auto t = x, u = x;
  for (int64_t c = 128; c < 256; ++c) u[1 * cols + c] *= 1000.0f;
  fp8_quantize_along_rows(t.data(), rows, cols, Fp8Recipe::kTensor);
  fp8_quantize_along_rows(u.data(), rows, cols, Fp8Recipe::kTensor);
  expect_quantized(x, t);
  int moved = 0;
  for (int64_t c = 0; c < 128; ++c) moved += t[c] != u[c];
  EXPECT_GT(moved, 0);
}

TEST(Fp8, BlocksDownColumnsAndWeightBlocks) {
  std::mt19937_64 rng(2);
  const int64_t rows = 300, cols = 5;
  const auto x = random_floats(rng, rows * cols);
  auto q = x;
  fp8_quantize_down_columns(q.data(), rows, cols, Fp8Recipe::kBlock);
  expect_quantized(x, q);
  auto y = x;
  for (int64_t r = 128; r < 256; ++r) y[r * cols + 2] *= 1000.0f;  // column 2's second block
  fp8_quantize_down_columns(y.data(), rows, cols, Fp8Recipe::kBlock);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if (!(c == 2 && r >= 128 && r < 256)) {
        ASSERT_EQ(y[r * cols + c], q[r * cols + c]);
      }

  const int64_t wr = 200, wc = 260;  // 2 x 3 blocks of 128 x 128, the last ones partial
  const auto w = random_floats(rng, wr * wc);
  auto wq = w;
  fp8_quantize_weight(wq.data(), wr, wc, Fp8Recipe::kBlock);
  expect_quantized(w, wq);
  auto wy = w;
  for (int64_t r = 128; r < wr; ++r)
    for (int64_t c = 128; c < 256; ++c) wy[r * wc + c] *= 1000.0f;  // block (1, 1)
  fp8_quantize_weight(wy.data(), wr, wc, Fp8Recipe::kBlock);
  for (int64_t r = 0; r < wr; ++r)
    for (int64_t c = 0; c < wc; ++c)
      if (!(r >= 128 && c >= 128 && c < 256)) {
        ASSERT_EQ(wy[r * wc + c], wq[r * wc + c]);
      }
}

// Each group's operands quantized here with the block functions directly (the recipe's blocks
// restart at each group's first row), then the unquantized grouped GEMM: grouped_gemm_fp8 must
// give the same values, and differ from the unquantized product by a few percent.
TEST(Fp8, GroupedGemmQuantizesEachGroupsOperands) {
  std::mt19937_64 rng(3);
  const std::vector<int64_t> offsets = {0, 70, 70, 300, 301};  // an empty group, a single row
  const int64_t G = 4, rows = offsets.back(), M = 136, N = 40, K = 260;
  for (GroupedLayout layout : {GroupedLayout::kRowsTimesWeight, GroupedLayout::kRowsTimesWeightT,
                               GroupedLayout::kRowsTTimesRows}) {
    const bool wgrad = layout == GroupedLayout::kRowsTTimesRows;
    const auto A = random_floats(rng, rows * (wgrad ? M : K));
    const auto B = random_floats(rng, wgrad ? rows * N : G * K * N);
    const int64_t c_size = wgrad ? G * M * N : rows * N;
    for (Fp8Recipe recipe : {Fp8Recipe::kTensor, Fp8Recipe::kBlock}) {
      auto qa = A, qb = B;
      for (int64_t g = 0; g < G; ++g) {
        const int64_t r0 = offsets[g], n = offsets[g + 1] - r0;
        if (wgrad) {
          fp8_quantize_down_columns(qa.data() + r0 * M, n, M, recipe);
          fp8_quantize_down_columns(qb.data() + r0 * N, n, N, recipe);
        } else {
          fp8_quantize_along_rows(qa.data() + r0 * K, n, K, recipe);
          if (layout == GroupedLayout::kRowsTimesWeight)
            fp8_quantize_weight(qb.data() + g * K * N, K, N, recipe);
          else
            fp8_quantize_weight(qb.data() + g * K * N, N, K, recipe);
        }
      }
      std::vector<float> want(c_size), got(c_size), plain(c_size);
      cpu::grouped_gemm(layout, G, offsets.data(), M, N, K, qa.data(), qb.data(), want.data(),
                        DType::kFp32);
      cpu::grouped_gemm_fp8(layout, G, offsets.data(), M, N, K, A.data(), B.data(), got.data(),
                            DType::kFp32, recipe);
      cpu::grouped_gemm(layout, G, offsets.data(), M, N, K, A.data(), B.data(), plain.data(),
                        DType::kFp32);
      ASSERT_EQ(got, want) << int(layout) << " " << int(recipe);
      const double err = test::rel_l2(got, plain);
      EXPECT_GT(err, 1e-3) << int(layout) << " " << int(recipe);
      EXPECT_LT(err, 0.1) << int(layout) << " " << int(recipe);
    }
  }
}

}  // namespace
}  // namespace moe
