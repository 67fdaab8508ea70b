// The FP8 quantization kernels (kernels/cuda/fp8_quantize.h) against their CPU twin (core/fp8.h)
// on seeded random bf16 data with outliers, an all-zero group, an empty group, ragged groups and
// partial 128-blocks: every code times its scale, read back through the documented scale layouts,
// equals the CPU twin's quantized value bit for bit, for both recipes.
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/fp8.h"
#include "kernels/cuda/fp8_quantize.h"
#include "tests/cuda/cuda_test_util.h"

namespace moe::test {
namespace {

constexpr int64_t kB = kFp8Block;

float decode(uint8_t code) {
  __nv_fp8_e4m3 f;
  f.__x = code;
  return float(f);
}

// bf16 values, one in a hundred 50 times larger (so that per-tensor and block scales differ),
// and group `zero_group`'s rows all zero.
std::vector<float> seeded(int64_t rows, int64_t cols, const std::vector<int64_t>& offsets,
                          int64_t zero_group, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> v(rows * cols);
  for (float& x : v) x = round_to_bf16(g(rng) * (u(rng) < 0.01f ? 50.0f : 1.0f));
  if (zero_group >= 0)
    for (int64_t i = offsets[zero_group] * cols; i < offsets[zero_group + 1] * cols; ++i) v[i] = 0;
  return v;
}

const std::vector<int64_t> kOffsets = {0, 37, 237, 237, 365, 370, 640};  // one empty group
constexpr int64_t kZeroGroup = 4;
constexpr int64_t kGroups = 6;

class Fp8QuantizeCuda : public ::testing::TestWithParam<Fp8Recipe> {};

TEST_P(Fp8QuantizeCuda, RowsMatchCpuTwin) {
  MOE_REQUIRE_GPU();
  const Fp8Recipe recipe = GetParam();
  const int64_t R = kOffsets.back();
  for (int64_t K : {256, 200}) {
    SCOPED_TRACE("K " + std::to_string(K));
    const std::vector<float> X = seeded(R, K, kOffsets, kZeroGroup, 3 + K);
    DevBuf<uint16_t> dx(to_bf16_bits(X));
    DevBuf<int64_t> doff(kOffsets);
    DevBuf<uint8_t> dq(R * K);
    const int64_t Kb = (K + kB - 1) / kB;
    DevBuf<float> ds(recipe == Fp8Recipe::kTensor ? cuda::kTensorScaleStride * kGroups : Kb * R);
    cuda::quantize_rows_fp8(dx.ptr, doff.ptr, kGroups, R + 16, K, recipe, dq.ptr, ds.ptr, nullptr);
    const std::vector<uint8_t> q = dq.host();
    const std::vector<float> s = ds.host();
    int64_t mismatches = 0;
    for (int64_t g = 0; g < kGroups; ++g) {
      const int64_t r0 = kOffsets[g], n = kOffsets[g + 1] - r0;
      std::vector<float> want(X.begin() + r0 * K, X.begin() + (r0 + n) * K);
      fp8_quantize_along_rows(want.data(), n, K, recipe);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < K; ++c) {
          const float scale = recipe == Fp8Recipe::kTensor ? s[cuda::kTensorScaleStride * g]
                                                           : s[Kb * r0 + (c / kB) * n + r];
          mismatches += decode(q[(r0 + r) * K + c]) * scale != want[r * K + c];
        }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST_P(Fp8QuantizeCuda, ColumnsTransposedMatchCpuTwin) {
  MOE_REQUIRE_GPU();
  const Fp8Recipe recipe = GetParam();
  const int64_t R = kOffsets.back(), M = 80, ld = R + 16;
  const std::vector<float> X = seeded(R, M, kOffsets, kZeroGroup, 11);
  DevBuf<uint16_t> dx(to_bf16_bits(X));
  DevBuf<int64_t> doff(kOffsets);
  DevBuf<uint8_t> dq(M * ld);
  DevBuf<float> ds(recipe == Fp8Recipe::kTensor ? cuda::kTensorScaleStride * kGroups
                                                : cuda::cols_fp8_scale_bound(kGroups, R, M));
  cuda::quantize_cols_fp8(dx.ptr, doff.ptr, kGroups, R, M, recipe, dq.ptr, ld, ds.ptr, nullptr);
  const std::vector<uint8_t> q = dq.host();
  const std::vector<float> s = ds.host();
  int64_t mismatches = 0, blocks_before = 0;
  for (int64_t g = 0; g < kGroups; ++g) {
    const int64_t r0 = kOffsets[g], n = kOffsets[g + 1] - r0;
    std::vector<float> want(X.begin() + r0 * M, X.begin() + (r0 + n) * M);
    fp8_quantize_down_columns(want.data(), n, M, recipe);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t m = 0; m < M; ++m) {
        const float scale = recipe == Fp8Recipe::kTensor ? s[cuda::kTensorScaleStride * g]
                                                         : s[M * blocks_before + (r / kB) * M + m];
        mismatches += decode(q[m * ld + r0 + r]) * scale != want[r * M + m];
      }
    blocks_before += (n + kB - 1) / kB;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_P(Fp8QuantizeCuda, WeightsBothWaysMatchCpuTwin) {
  MOE_REQUIRE_GPU();
  const Fp8Recipe recipe = GetParam();
  const int64_t G = 3, P = 200, Q = 384;
  const std::vector<float> W = seeded(G * P, Q, {0, P, 2 * P, 3 * P}, 1, 17);
  DevBuf<uint16_t> dw(to_bf16_bits(W));
  const int64_t Pb = (P + kB - 1) / kB, Qb = (Q + kB - 1) / kB;
  for (bool transpose : {false, true}) {
    SCOPED_TRACE(transpose ? "transposed" : "as stored");
    DevBuf<uint8_t> dq(G * P * Q);
    const int64_t stride = cuda::weight_fp8_scale_stride(P, Q);
    DevBuf<float> ds(recipe == Fp8Recipe::kTensor ? cuda::kTensorScaleStride * G : G * stride);
    cuda::quantize_weight_fp8(dw.ptr, G, P, Q, transpose, recipe, dq.ptr, ds.ptr, nullptr);
    const std::vector<uint8_t> q = dq.host();
    const std::vector<float> s = ds.host();
    int64_t mismatches = 0;
    for (int64_t g = 0; g < G; ++g) {
      std::vector<float> want(W.begin() + g * P * Q, W.begin() + (g + 1) * P * Q);
      fp8_quantize_weight(want.data(), P, Q, recipe);
      for (int64_t p = 0; p < P; ++p)
        for (int64_t c = 0; c < Q; ++c) {
          // cuBLASLt's layout: [N, K] tiles, each N tile's row of K tiles padded to 4.
          const int64_t tile = transpose ? (c / kB) * ((Pb + 3) / 4 * 4) + p / kB
                                         : (p / kB) * ((Qb + 3) / 4 * 4) + c / kB;
          const float scale =
              recipe == Fp8Recipe::kTensor ? s[cuda::kTensorScaleStride * g] : s[g * stride + tile];
          const uint8_t code = q[g * P * Q + (transpose ? c * P + p : p * Q + c)];
          mismatches += decode(code) * scale != want[p * Q + c];
        }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Recipes, Fp8QuantizeCuda,
                         ::testing::Values(Fp8Recipe::kTensor, Fp8Recipe::kBlock),
                         [](const auto& info) {
                           return info.param == Fp8Recipe::kTensor ? "tensor" : "block";
                         });

}  // namespace
}  // namespace moe::test
