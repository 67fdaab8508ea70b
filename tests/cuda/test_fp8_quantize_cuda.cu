// The FP8 quantization kernels (kernels/cuda/fp8_quantize.h) against their CPU twin (core/fp8.h)
// on seeded random bf16 data with outliers, an all-zero group, an empty group, ragged and aligned
// groups and partial 128-blocks: every code times its scale, read back through the documented
// scale layouts, equals the CPU twin's quantized value bit for bit, for both recipes and both
// orientations, alone and from one pass.
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/fp8.h"
#include "kernels/cuda/expert_ffn.h"
#include "kernels/cuda/fp8_quantize.h"
#include "tests/cuda/cuda_test_util.h"

namespace moe::test {
namespace {

constexpr int64_t kB = kFp8Block;

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

// Ragged groups (one empty, one all zero, one past a 128-row block), and groups whose rows start
// at multiples of 16 as the step's align gives them (the transposed codes' 8-byte stores).
const std::vector<int64_t> kOffsets = {0, 37, 237, 237, 365, 370, 640};
const std::vector<int64_t> kAligned = {0, 16, 160, 160, 304, 320, 592};
constexpr int64_t kZeroGroup = 4;
constexpr int64_t kGroups = 6;

// Mismatches of the codes q [R, K] times their 1 x 128 (or per-group) scales against the CPU twin.
int64_t rows_mismatches(const std::vector<float>& X, const std::vector<int64_t>& offsets, int64_t K,
                        Fp8Recipe recipe, const std::vector<uint8_t>& q,
                        const std::vector<float>& s) {
  const int64_t Kb = (K + kB - 1) / kB;
  int64_t mismatches = 0;
  for (int64_t g = 0; g + 1 < int64_t(offsets.size()); ++g) {
    const int64_t r0 = offsets[g], n = offsets[g + 1] - r0;
    std::vector<float> want(X.begin() + r0 * K, X.begin() + (r0 + n) * K);
    fp8_quantize_along_rows(want.data(), n, K, recipe);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < K; ++c) {
        const float scale = recipe == Fp8Recipe::kTensor ? s[cuda::kTensorScaleStride * g]
                                                         : s[Kb * r0 + (c / kB) * n + r];
        mismatches += e4m3_value(q[(r0 + r) * K + c]) * scale != want[r * K + c];
      }
  }
  return mismatches;
}

// The same for the transposed codes qt [K, ld] and their 128 x 1 (or per-group) scales.
int64_t cols_mismatches(const std::vector<float>& X, const std::vector<int64_t>& offsets, int64_t K,
                        int64_t ld, Fp8Recipe recipe, const std::vector<uint8_t>& qt,
                        const std::vector<float>& s) {
  int64_t mismatches = 0, blocks_before = 0;
  for (int64_t g = 0; g + 1 < int64_t(offsets.size()); ++g) {
    const int64_t r0 = offsets[g], n = offsets[g + 1] - r0;
    std::vector<float> want(X.begin() + r0 * K, X.begin() + (r0 + n) * K);
    fp8_quantize_down_columns(want.data(), n, K, recipe);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t m = 0; m < K; ++m) {
        const float scale = recipe == Fp8Recipe::kTensor ? s[cuda::kTensorScaleStride * g]
                                                         : s[K * blocks_before + (r / kB) * K + m];
        mismatches += e4m3_value(qt[m * ld + r0 + r]) * scale != want[r * K + m];
      }
    blocks_before += (n + kB - 1) / kB;
  }
  return mismatches;
}

// X [R, K] in groups `offsets` quantized both ways in one pass (quantize_rows_and_cols_fp8, the
// transposed codes at leading dimension ld): each orientation's mismatches against the CPU twin,
// and the rows' scales.
struct BothWays {
  int64_t rows_mismatches, cols_mismatches;
  std::vector<float> row_scales;
};
BothWays quantize_both_ways(const std::vector<float>& X, const std::vector<int64_t>& offsets,
                            int64_t K, int64_t ld, Fp8Recipe recipe) {
  const int64_t G = int64_t(offsets.size()) - 1, R = offsets.back(), Kb = (K + kB - 1) / kB;
  DevBuf<uint16_t> dx(to_bf16_bits(X));
  DevBuf<int64_t> doff(offsets);
  DevBuf<uint8_t> dq(R * K), dqt(K * ld);
  const bool tensor = recipe == Fp8Recipe::kTensor;
  DevBuf<float> ds(tensor ? cuda::kTensorScaleStride * G : Kb * R);
  DevBuf<float> dst(tensor ? cuda::kTensorScaleStride * G : cuda::cols_fp8_scale_bound(G, R, K));
  cuda::quantize_rows_and_cols_fp8(dx.ptr, doff.ptr, G, R, K, recipe, dq.ptr, ds.ptr, dqt.ptr, ld,
                                   dst.ptr, nullptr);
  BothWays r{0, 0, ds.host()};
  r.rows_mismatches = rows_mismatches(X, offsets, K, recipe, dq.host(), r.row_scales);
  r.cols_mismatches = cols_mismatches(X, offsets, K, ld, recipe, dqt.host(), dst.host());
  return r;
}

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
    EXPECT_EQ(rows_mismatches(X, kOffsets, K, recipe, dq.host(), ds.host()), 0);
  }
}

TEST_P(Fp8QuantizeCuda, ColumnsTransposedMatchCpuTwin) {
  MOE_REQUIRE_GPU();
  const Fp8Recipe recipe = GetParam();
  for (const auto& offsets : {kOffsets, kAligned}) {
    const int64_t R = offsets.back(), M = 80, ld = R + 16;
    SCOPED_TRACE("rows " + std::to_string(R));
    const std::vector<float> X = seeded(R, M, offsets, kZeroGroup, 11);
    DevBuf<uint16_t> dx(to_bf16_bits(X));
    DevBuf<int64_t> doff(offsets);
    DevBuf<uint8_t> dq(M * ld);
    DevBuf<float> ds(recipe == Fp8Recipe::kTensor ? cuda::kTensorScaleStride * kGroups
                                                  : cuda::cols_fp8_scale_bound(kGroups, R, M));
    cuda::quantize_cols_fp8(dx.ptr, doff.ptr, kGroups, R, M, recipe, dq.ptr, ld, ds.ptr, nullptr);
    EXPECT_EQ(cols_mismatches(X, offsets, M, ld, recipe, dq.host(), ds.host()), 0);
  }
}

// Both orientations from one pass, a partial column block, each to its own scales.
TEST_P(Fp8QuantizeCuda, RowsAndColumnsInOnePassMatchCpuTwin) {
  MOE_REQUIRE_GPU();
  const int64_t R = kAligned.back(), K = 136;
  const BothWays r =
      quantize_both_ways(seeded(R, K, kAligned, kZeroGroup, 23), kAligned, K, R + 32, GetParam());
  EXPECT_EQ(r.rows_mismatches, 0);
  EXPECT_EQ(r.cols_mismatches, 0);
}

// Values below kFp8TinyValue beside normal ones, in a few tiles' chunks only, and a group of
// values so small that its scales fall below kFp8TinyScale: the exact quotient (fp8_quotient's
// division) where a tile holds one, the branch-free one elsewhere, every code and scale the
// CPU twin's, both orientations from one pass.
TEST_P(Fp8QuantizeCuda, TinyValuesAndScalesMatchCpuTwin) {
  MOE_REQUIRE_GPU();
  const int64_t R = kAligned.back(), K = 256;
  std::vector<float> X = seeded(R, K, kAligned, kZeroGroup, 37);
  for (int64_t i = 5; i < R * K; i += 4099) X[i] = round_to_bf16(i % 2 ? 1e-30f : -3e-31f);
  for (int64_t i = kAligned[1] * K; i < kAligned[2] * K; ++i) X[i] = round_to_bf16(X[i] * 1e-38f);
  const BothWays r = quantize_both_ways(X, kAligned, K, R + 32, GetParam());
  EXPECT_EQ(r.rows_mismatches, 0);
  EXPECT_EQ(r.cols_mismatches, 0);
  // The tiny group's scale is tiny indeed (per tensor: group 1's).
  if (GetParam() == Fp8Recipe::kTensor)
    EXPECT_LT(r.row_scales[cuda::kTensorScaleStride * 1], kFp8TinyScale);
}

// Hundreds of groups (the kernel's group table spans several runs a thread) and many more tiles
// than the GPU holds blocks (each persistent block walks many, loading the next beside this one).
TEST_P(Fp8QuantizeCuda, ManyGroupsAndTilesMatchCpuTwin) {
  MOE_REQUIRE_GPU();
  const Fp8Recipe recipe = GetParam();
  std::mt19937_64 rng(29);
  std::vector<int64_t> offsets = {0};
  for (int g = 0; g < 300; ++g)  // one group in ten empty, the rest up to 300 rows, aligned to 16
    offsets.push_back(offsets.back() + (g % 10 == 3 ? 0 : int64_t(rng() % 19) * 16));
  const int64_t R = offsets.back(), K = 1024;
  const BothWays r = quantize_both_ways(seeded(R, K, offsets, 7, 31), offsets, K, R + 16, recipe);
  EXPECT_EQ(r.rows_mismatches, 0);
  EXPECT_EQ(r.cols_mismatches, 0);
}

TEST_P(Fp8QuantizeCuda, WeightsBothWaysMatchCpuTwin) {
  MOE_REQUIRE_GPU();
  const Fp8Recipe recipe = GetParam();
  const int64_t G = 5, P = 1000, Q = 1544;  // 440 tiles, partial ones both ways
  const std::vector<float> W = seeded(G * P, Q, {0, P, 2 * P, 3 * P, 4 * P, 5 * P}, 1, 17);
  DevBuf<uint16_t> dw(to_bf16_bits(W));
  const int64_t Pb = (P + kB - 1) / kB, Qb = (Q + kB - 1) / kB;
  const int64_t stride = cuda::weight_fp8_scale_stride(P, Q);
  const int64_t n_scales = recipe == Fp8Recipe::kTensor ? cuda::kTensorScaleStride * G : G * stride;
  DevBuf<uint8_t> dq(G * P * Q), dqt(G * P * Q);
  DevBuf<float> ds(n_scales), dst(n_scales);
  cuda::quantize_weight_fp8(dw.ptr, G, P, Q, recipe, dq.ptr, ds.ptr, dqt.ptr, dst.ptr, nullptr);
  for (bool transpose : {false, true}) {
    SCOPED_TRACE(transpose ? "transposed" : "as stored");
    const std::vector<uint8_t> q = transpose ? dqt.host() : dq.host();
    const std::vector<float> s = transpose ? dst.host() : ds.host();
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
          mismatches += e4m3_value(code) * scale != want[p * Q + c];
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

// dispatch_dtype fp8's rows: packed on the GPU as the host packs them, byte for byte (padding
// included); as w_in's gradient operand, the transposed codes of their values in bf16; and as the
// up projection's operand, the codes and scales the rows quantizer makes of the same rows, so
// that the dispatched step's forward is the undispatched one's bit for bit.
TEST(Fp8RowsCuda, PackedRowsAndTheirGemmOperandsMatchTheirTwins) {
  MOE_REQUIRE_GPU();
  const int64_t R = kOffsets.back();
  for (int64_t H : {256, 208}) {
    SCOPED_TRACE("H " + std::to_string(H));
    const int64_t row = fp8_row_bytes(H), Hb = (H + kB - 1) / kB;
    const std::vector<float> X = seeded(R, H, kOffsets, kZeroGroup, 11 + H);
    DevBuf<uint16_t> dx(to_bf16_bits(X));
    DevBuf<uint8_t> packed(std::vector<uint8_t>(R * row, 0xab));
    cuda::pack_fp8_rows(dx.ptr, R, H, packed.ptr, nullptr);
    std::vector<uint8_t> want(R * row);
    fp8_pack_rows(X.data(), R, H, want.data());
    EXPECT_EQ(packed.host(), want);

    // w_in's gradient: the transposed codes of the packed rows' values in bf16, read from them.
    DevBuf<int64_t> doff(kOffsets);
    std::vector<float> values(R * H);
    fp8_unpack_rows(want.data(), R, H, values.data());
    for (float& v : values) v = round_to_bf16(v);
    const int64_t ld = R + 16;
    DevBuf<uint8_t> qt(H * ld);
    DevBuf<float> st(cuda::cols_fp8_scale_bound(kGroups, R, H));
    cuda::quantize_packed_cols_fp8(packed.ptr, doff.ptr, kGroups, R, H, qt.ptr, ld, st.ptr,
                                   nullptr);
    EXPECT_EQ(cols_mismatches(values, kOffsets, H, ld, Fp8Recipe::kBlock, qt.host(), st.host()), 0);

    DevBuf<uint8_t> q1(R * H), q2(R * H);
    DevBuf<float> s1(Hb * R), s2(Hb * R);
    cuda::quantize_rows_fp8(dx.ptr, doff.ptr, kGroups, R + 16, H, Fp8Recipe::kBlock, q1.ptr, s1.ptr,
                            nullptr);
    cuda::fp8_rows_to_gemm(packed.ptr, doff.ptr, kGroups, R + 16, H, q2.ptr, s2.ptr, nullptr);
    EXPECT_EQ(q2.host(), q1.host());
    EXPECT_EQ(s2.host(), s1.host());
  }
}

// fp8_tensor's amax found by the SwiGLU kernels as they write a and dh (GroupAmax): each group's
// largest |output| as stored (zero for the empty and the all-zero group), the outputs bit for bit
// those of the kernels without it, and the quantization given it (amax_ready) the codes and scales
// of its own pass. Small rows (one pass of threads), rows of 60 (N = 1 per thread) and a hundred
// groups over many more steps than the capped grid's threads (each thread many steps, blocks
// across groups).
TEST(Fp8SwigluAmaxCuda, GivesTheQuantizationsOwnScales) {
  MOE_REQUIRE_GPU();
  std::mt19937_64 rng(41);
  std::vector<int64_t> many = {0};
  for (int g = 0; g < 100; ++g)
    many.push_back(many.back() + (g % 10 == 3 ? 0 : int64_t(rng() % 18) * 16));
  struct Case {
    std::vector<int64_t> offsets;
    int64_t F;
  };
  for (const Case& c : {Case{kAligned, 136}, Case{kAligned, 60}, Case{many, 512}}) {
    const int64_t G = int64_t(c.offsets.size()) - 1, R = c.offsets.back(), F = c.F;
    SCOPED_TRACE("G " + std::to_string(G) + " F " + std::to_string(F));
    DevBuf<int64_t> doff(c.offsets);
    StorageBuf h(DType::kBf16, seeded(R, 2 * F, c.offsets, kZeroGroup, 43));
    StorageBuf da(DType::kBf16, seeded(R, F, c.offsets, -1, 47));
    for (bool backward : {false, true}) {
      SCOPED_TRACE(backward ? "swiglu_bwd" : "swiglu_fwd");
      const int64_t K = backward ? 2 * F : F;  // the output's row
      StorageBuf plain(DType::kBf16, R * K), fused(DType::kBf16, R * K);
      DevBuf<float> bits(cuda::kTensorScaleStride * G);
      const cuda::GroupAmax amax{doff.ptr, G, reinterpret_cast<unsigned*>(bits.ptr),
                                 cuda::kTensorScaleStride};
      if (backward) {
        cuda::swiglu_bwd(da.ptr, h.ptr, doff.ptr + G, R, F, DType::kBf16, plain.ptr, nullptr);
        cuda::swiglu_bwd(da.ptr, h.ptr, doff.ptr + G, R, F, DType::kBf16, fused.ptr, nullptr, amax);
      } else {
        cuda::swiglu_fwd(h.ptr, doff.ptr + G, R, F, DType::kBf16, plain.ptr, nullptr);
        cuda::swiglu_fwd(h.ptr, doff.ptr + G, R, F, DType::kBf16, fused.ptr, nullptr, amax);
      }
      const std::vector<float> out = plain.host();
      ASSERT_EQ(fused.host(), out);
      const std::vector<float> got = bits.host();
      for (int64_t g = 0; g < G; ++g) {
        float want = 0.0f;
        for (int64_t i = c.offsets[g] * K; i < c.offsets[g + 1] * K; ++i)
          want = std::max(want, std::fabs(out[size_t(i)]));
        EXPECT_EQ(got[size_t(cuda::kTensorScaleStride * g)], want) << "group " << g;
      }
      if (K % 8 != 0) continue;  // the quantization reads 16-byte chunks
      DevBuf<uint8_t> q1(R * K), q2(R * K);
      DevBuf<float> s1(cuda::kTensorScaleStride * G);
      cuda::quantize_rows_fp8(plain.ptr, doff.ptr, G, R, K, Fp8Recipe::kTensor, q1.ptr, s1.ptr,
                              nullptr);
      cuda::quantize_rows_and_cols_fp8(plain.ptr, doff.ptr, G, R, K, Fp8Recipe::kTensor, q2.ptr,
                                       bits.ptr, nullptr, 0, nullptr, nullptr, true);
      EXPECT_EQ(q2.host(), q1.host());
      EXPECT_EQ(bits.host(), s1.host());
    }
  }
}

}  // namespace
}  // namespace moe::test
