// The grouped sm90 GEMM on FP8 codes (GroupedGemm::run_fp8, both recipes' six expert GEMMs)
// against a float64 product of the decoded codes on the host: random e4m3 codes (every finite
// one), a scale per group and operand (fp8_tensor) or per block in the quantization's layouts
// (fp8_block: every block's scale its own, so one read from the wrong place shows), ragged and
// empty groups, K with a partial last 128-stage,
// N with a partial last tile, NaN codes past the last group (computed and not stored, or zeroed
// before the MMAs), every schedule, both weight-gradient outputs and adding into fp32, and
// SwiGLU's backward in the epilogue against the separate kernel. FP8 products are exact in fp32,
// but Hopper's tensor cores sum them with about 13 mantissa bits inside each 128-K stage (fp32
// beyond it), so an output is within a bf16 rounding of the exact sum plus a few 2^-13
// of the sum of its products' magnitudes: far below what a wrong scale, group or K stage gives (a
// fraction of that sum).
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/expert_ffn.h"
#include "kernels/cuda/fp8_quantize.h"
#include "kernels/cuda/grouped_gemm.h"
#include "tests/cuda/gemm_test_util.h"

namespace moe::test {
namespace {

using cuda::GroupedEpilogue;
using cuda::GroupedFp8Scales;
using cuda::GroupedGemm;
using cuda::GroupedGemmShape;
using cuda::GroupedSchedule;

// Group g's scales at [kStride * g], as the FFN passes them.
constexpr int64_t kStride = cuda::kTensorScaleStride;

// Random finite e4m3 codes, at most |2| (exponent field below 9), so that sums of a few hundred
// products stay in the range where a bf16 ulp is a fair tolerance.
std::vector<uint8_t> random_codes(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> c(static_cast<size_t>(n));
  for (uint8_t& x : c) {
    const uint32_t r = uint32_t(rng());
    x = uint8_t((r & 0x80) | ((r >> 8) % 9) << 3 | ((r >> 16) & 7));
  }
  return c;
}

std::vector<float> random_scales(int64_t G, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(0.01f, 3.0f);
  std::vector<float> s(size_t(kStride * G), NAN);  // the gaps must not be read
  for (int64_t g = 0; g < G; ++g) s[size_t(kStride * g)] = d(rng);
  return s;
}

// n positive random scales (block scales: each block its own).
std::vector<float> random_block_scales(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(0.01f, 3.0f);
  std::vector<float> s(static_cast<size_t>(n));
  for (float& x : s) x = d(rng);
  return s;
}

struct Fp8Case {
  std::vector<int64_t> rows;
  int64_t N, K, spare_rows;
};

// The grouped product in float64 (unrounded), and each element's sum of its products'
// magnitudes (0 where an element is not computed).
struct HostProduct {
  std::vector<double> C, magnitude;
  // Element i = sum_k scale_of(k / 128) a[k] b[k] over n codes of each (the scales of K's
  // 128-blocks: one for all of them with fp8_tensor), and its magnitude.
  template <class ScaleOfBlock>
  void set_blocks(size_t i, const uint8_t* a, const uint8_t* b, int64_t n, ScaleOfBlock scale_of) {
    double sum = 0, mag = 0;
    for (int64_t k0 = 0; k0 < n; k0 += kFp8Block) {
      double block_sum = 0, block_mag = 0;
      for (int64_t k = k0; k < std::min(n, k0 + kFp8Block); ++k) {
        const double x = double(e4m3_value(a[k])) * e4m3_value(b[k]);
        block_sum += x;
        block_mag += std::fabs(x);
      }
      const double scale = scale_of(k0 / kFp8Block);
      sum += block_sum * scale;
      mag += block_mag * std::fabs(scale);
    }
    C[i] = sum;
    magnitude[i] = mag;
  }
};
// fp8_tensor's scale of group g's product.
double scale_of(const std::vector<float>& sa, const std::vector<float>& sb, int64_t g) {
  return double(sa[size_t(kStride * g)]) * double(sb[size_t(kStride * g)]);
}

// Every element within a bf16 rounding (2^-8 relative) of the exact sum plus 2^-10 of its
// products' magnitudes (the tensor cores' truncation, a few 2^-13 of it, with room), and
// elements outside the groups untouched. Prints the largest error in units of the magnitude.
void expect_within_fp8_sums(const std::vector<float>& got, const HostProduct& want,
                            const std::string& what) {
  ASSERT_EQ(got.size(), want.C.size());
  int64_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want.C[i]);
    if (want.magnitude[i] > 0) worst = std::max(worst, err / want.magnitude[i]);
    if (!(err <= 0x1p-8 * std::fabs(want.C[i]) + 0x1p-10 * want.magnitude[i])) {
      if (bad < 5)
        std::printf("  %s[%zu]: got %.8g want %.8g\n", what.c_str(), i, got[i], want.C[i]);
      ++bad;
    }
  }
  std::printf("  %s: largest error %.2e of the products' magnitude\n", what.c_str(), worst);
  EXPECT_EQ(bad, 0) << what;
}

const GroupedSchedule kSchedules[] = {{1, false}, {2, false}, {1, true}};

// The row GEMMs, C = A @ B[g]^T per group, with either recipe's scales: fp8_tensor's per group
// and operand; fp8_block's 1 x 128 row scales (group g's from ceil(K / 128) * offsets[g], block
// kb of its row r at kb * n_g + r) times the weight tile's (expert g's from g * stride, tile
// (nb, kb) at nb * ld + kb, the gaps of ld NaN). Ragged groups that start anywhere, a partial last
// K stage and N tile (on 256-column tiles, one whose second half lies wholly past N), NaN codes
// past the last group (computed, not stored), every schedule, both tile widths (on 256 with
// fp8_block, groups whose row scales the producer copies into the stages, 16-byte aligned, and
// groups whose it cannot).
TEST(GroupedGemmSm90Fp8, MatchesTheDecodedProduct) {
  MOE_REQUIRE_SM90();
  GroupedGemm gg;
  const Fp8Case cases[] = {
      {{0, 1, 127, 128, 129, 300, 0, 64}, 256, 320, 40},  // partial K stage, NaN rows after
      {{200, 0, 17}, 200, 128, 0},                        // partial N tile, K one stage
      {{3, 130}, 72, 256, 0},                             // N within one 128-column half
      // K 7 stages: the mainloop's chunks of 4, 2 and 1
      {{5, 70, 0, 33, 129, 2, 64, 1, 0, 250, 8, 96, 3, 0, 140, 11, 48, 77, 1, 190}, 136, 880, 0},
  };
  uint64_t seed = 900;
  for (const Fp8Case& c : cases) {
    const int64_t G = int64_t(c.rows.size());
    const std::vector<int64_t> off = offsets_of(c.rows);
    const int64_t rows = off[G], alloc_rows = rows + c.spare_rows;
    std::vector<uint8_t> A = random_codes(alloc_rows * c.K, seed++);
    for (int64_t i = rows * c.K; i < alloc_rows * c.K; ++i) A[size_t(i)] = 0x7F;  // NaN
    const std::vector<uint8_t> B = random_codes(G * c.N * c.K, seed++);
    DevBuf<uint8_t> dA(A), dB(B);
    DevBuf<int64_t> doff(off);
    const GroupedGemmShape s{GroupedLayout::kRowsTimesWeightT, G, alloc_rows, 0, c.N, c.K};
    for (bool block : {false, true}) {
      const int64_t k_blocks = (c.K + kFp8Block - 1) / kFp8Block;
      const int64_t tiles_ld = cuda::weight_fp8_tiles_ld(c.K);
      const int64_t stride = block ? cuda::weight_fp8_scale_stride(c.N, c.K) : kStride;
      std::vector<float> sa, sb;
      if (block) {
        sa = random_block_scales(k_blocks * rows, seed++);
        sb.assign(size_t(G * stride), NAN);
        const std::vector<float> tiles = random_block_scales(G * stride, seed++);
        for (int64_t g = 0; g < G; ++g)
          for (int64_t nb = 0; nb < (c.N + 127) / 128; ++nb)
            for (int64_t kb = 0; kb < k_blocks; ++kb) {
              const size_t at = size_t(g * stride + nb * tiles_ld + kb);
              sb[at] = tiles[at];
            }
      } else {
        sa = random_scales(G, seed++);
        sb = random_scales(G, seed++);
      }
      HostProduct want{std::vector<double>(size_t(alloc_rows * c.N), -7.0f),
                       std::vector<double>(size_t(alloc_rows * c.N), 0.0)};
      for (int64_t g = 0; g < G; ++g) {
        const int64_t n_g = off[g + 1] - off[g];
        for (int64_t r = 0; r < n_g; ++r)
          for (int64_t n = 0; n < c.N; ++n)
            want.set_blocks(size_t((off[g] + r) * c.N + n), &A[size_t((off[g] + r) * c.K)],
                            &B[size_t((g * c.N + n) * c.K)], c.K, [&](int64_t kb) {
                              return block ? double(sa[size_t(k_blocks * off[g] + kb * n_g + r)]) *
                                                 sb[size_t(g * stride + (n / 128) * tiles_ld + kb)]
                                           : scale_of(sa, sb, g);
                            });
      }
      DevBuf<float> dsa(sa), dsb(sb);
      const GroupedFp8Scales scales{dsa.ptr, dsb.ptr, stride, block, tiles_ld};
      for (const GroupedSchedule& sched : kSchedules)
        for (int tile_n : {128, 256}) {
          const std::string what =
              std::string(block ? "block" : "tensor") + " G=" + std::to_string(G) +
              " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
              (sched.pingpong ? " pingpong" : " cluster=" + std::to_string(sched.cluster)) +
              " tile_n=" + std::to_string(tile_n);
          SCOPED_TRACE(what);
          gg.force_tile_n(tile_n);
          StorageBuf dC(DType::kBf16, std::vector<float>(size_t(alloc_rows * c.N), -7.0f));
          ASSERT_EQ(GroupedGemm::fp8_unsupported_reason(
                        s, dA.ptr, dB.ptr, dC.ptr, GroupedEpilogue::kStore, DType::kBf16, &scales),
                    "");
          gg.set_schedule(sched);
          gg.run_fp8(GroupedEpilogue::kStore, s, doff.ptr, dA.ptr, dB.ptr, scales, dC.ptr, nullptr,
                     DType::kBf16, nullptr);
          CUDA_CHECK(cudaGetLastError());
          expect_within_fp8_sums(dC.host(), want, what);
        }
    }
  }
  gg.force_tile_n(0);
}

// The weight gradients on transposed codes: C[g] [M, N] = A^T[:, rows of g] @ B^T[:, rows of
// g]^T with either recipe's scales: fp8_tensor's per group and operand; fp8_block's 128 x 1
// scales down each group's rows (group g's from that operand's columns times the 128-row blocks
// of the groups before it, block kb of column m at kb * M + m). Against float64: groups starting
// at multiples of 16 rows (as align 16 gives the step; TMA reads the boxes from there) whose last
// stage takes the next group's codes, zeroed in shared memory, a last group whose rows end inside
// a 16-byte chunk (zeroed byte by byte), NaN codes past it, empty groups (zeros), bf16 and fp32
// outputs, adding into fp32, every schedule, both tile widths.
TEST(GroupedGemmSm90Fp8, WeightGradientsMatchTheDecodedProduct) {
  MOE_REQUIRE_SM90();
  GroupedGemm gg;
  const std::vector<int64_t> rows = {0, 16, 128, 144, 304, 16, 0, 880, 256, 37};
  const int64_t G = int64_t(rows.size()), M = 136, N = 200;
  const std::vector<int64_t> off = offsets_of(rows);
  const int64_t R = off[G], ld = (R + 40 + 15) / 16 * 16;
  std::vector<uint8_t> At = random_codes(M * ld, 960), Bt = random_codes(N * ld, 961);
  for (int64_t k = R; k < ld; ++k) {  // past the last group: NaN
    for (int64_t m = 0; m < M; ++m) At[size_t(m * ld + k)] = 0x7F;
    for (int64_t n = 0; n < N; ++n) Bt[size_t(n * ld + k)] = 0xFF;
  }
  std::vector<int64_t> before(size_t(G + 1), 0);  // 128-row blocks before each group
  for (int64_t g = 0; g < G; ++g) before[g + 1] = before[g] + (rows[g] + 127) / 128;
  const std::vector<float> c0 = random_values(G * M * N, DType::kFp32, 964);
  DevBuf<uint8_t> dA(At), dB(Bt);
  DevBuf<int64_t> doff(off);
  const GroupedGemmShape s{GroupedLayout::kRowsTTimesRows, G, ld, M, N, 0};
  for (bool block : {false, true}) {
    const std::vector<float> sa =
        block ? random_block_scales(M * before[G], 1962) : random_scales(G, 962);
    const std::vector<float> sb =
        block ? random_block_scales(N * before[G], 1963) : random_scales(G, 963);
    HostProduct want{std::vector<double>(size_t(G * M * N)),
                     std::vector<double>(size_t(G * M * N))};
    for (int64_t g = 0; g < G; ++g)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n)
          want.set_blocks(size_t((g * M + m) * N + n), &At[size_t(m * ld + off[g])],
                          &Bt[size_t(n * ld + off[g])], rows[g], [&](int64_t kb) {
                            return block ? double(sa[size_t((before[g] + kb) * M + m)]) *
                                               sb[size_t((before[g] + kb) * N + n)]
                                         : scale_of(sa, sb, g);
                          });
    HostProduct added = want;
    for (size_t i = 0; i < added.C.size(); ++i) added.C[i] += c0[i];
    DevBuf<float> dsa(sa), dsb(sb);
    const GroupedFp8Scales scales{dsa.ptr, dsb.ptr, kStride, block};
    for (const GroupedSchedule& sched : kSchedules)
      for (int tile_n : {128, 256}) {
        const std::string name =
            std::string(block ? "block " : "tensor ") +
            (sched.pingpong ? "pingpong" : "cluster=" + std::to_string(sched.cluster)) +
            " tile_n=" + std::to_string(tile_n);
        SCOPED_TRACE(name);
        gg.set_schedule(sched);
        gg.force_tile_n(tile_n);
        for (DType out : {DType::kBf16, DType::kFp32}) {
          StorageBuf dC(out, std::vector<float>(size_t(G * M * N), NAN));  // every element written
          ASSERT_EQ(GroupedGemm::fp8_unsupported_reason(s, dA.ptr, dB.ptr, dC.ptr,
                                                        GroupedEpilogue::kStore, out, &scales),
                    "");
          gg.run_fp8(GroupedEpilogue::kStore, s, doff.ptr, dA.ptr, dB.ptr, scales, dC.ptr, nullptr,
                     out, nullptr);
          CUDA_CHECK(cudaGetLastError());
          expect_within_fp8_sums(dC.host(), want, name + " wgrad " + dtype_name(out));
        }
        StorageBuf dC(DType::kFp32, c0);
        gg.run_fp8(GroupedEpilogue::kAdd, s, doff.ptr, dA.ptr, dB.ptr, scales, dC.ptr, nullptr,
                   DType::kFp32, nullptr);
        expect_within_fp8_sums(dC.host(), added, name + " wgrad added");
      }
    gg.force_tile_n(0);
    GroupedGemmShape odd = s;
    odd.M = 134;  // block: column scales of 536 bytes, not 16-byte bulk copies
    EXPECT_EQ(GroupedGemm::fp8_unsupported_reason(odd, dA.ptr, dB.ptr, dA.ptr,
                                                  GroupedEpilogue::kStore, DType::kFp32, &scales)
                  .empty(),
              !block);
  }
  EXPECT_NE(GroupedGemm::fp8_unsupported_reason(s, dA.ptr, dB.ptr, dA.ptr, GroupedEpilogue::kAdd,
                                                DType::kBf16),
            "");
  GroupedGemmShape odd = s;
  odd.total_rows = ld + 8;  // transposed rows of ld + 8 bytes: not a 16-byte multiple
  EXPECT_NE(GroupedGemm::fp8_unsupported_reason(odd, dA.ptr, dB.ptr, dA.ptr,
                                                GroupedEpilogue::kStore, DType::kFp32),
            "");
}

// SwiGLU's backward in the FP8 data gradient's epilogue gives the same dh as the separate kernel
// on the stored (scaled, bf16) da, bit for bit, with either recipe's scales.
TEST(GroupedGemmSm90Fp8, SwigluBackwardEpilogueMatchesTheSeparateKernel) {
  MOE_REQUIRE_SM90();
  GroupedGemm gg;
  const int64_t H = 256, F = 200;
  const std::vector<int64_t> off = offsets_of({0, 130, 1, 257, 0, 64});
  const int64_t G = int64_t(off.size()) - 1, R = off[G];
  DevBuf<uint8_t> dy(random_codes(R * H, 950)), w(random_codes(G * F * H, 951));
  DevBuf<float> sa(random_scales(G, 952)), sb(random_scales(G, 953));
  // fp8_block's: every row's and weight tile's scale its own.
  const int64_t stride = cuda::weight_fp8_scale_stride(F, H);
  DevBuf<float> block_sa(random_block_scales(R * ((H + 127) / 128), 955));
  DevBuf<float> block_sb(random_block_scales(G * stride, 956));
  StorageBuf h(DType::kBf16, random_values(R * 2 * F, DType::kBf16, 954));
  StorageBuf da(DType::kBf16, R * F), dh1(DType::kBf16, R * 2 * F), dh2(DType::kBf16, R * 2 * F);
  DevBuf<int64_t> doff(off);
  const GroupedGemmShape s{GroupedLayout::kRowsTimesWeightT, G, R, 0, F, H};
  for (bool block : {false, true})
    for (const GroupedSchedule& sched : kSchedules)
      for (int tile_n : {128, 256}) {
        SCOPED_TRACE(std::string(block ? "block " : "tensor ") +
                     (sched.pingpong ? "pingpong" : "cluster=" + std::to_string(sched.cluster)) +
                     " tile_n=" + std::to_string(tile_n));
        gg.force_tile_n(tile_n);
        const GroupedFp8Scales scales = block ? GroupedFp8Scales{block_sa.ptr, block_sb.ptr, stride,
                                                                 true, cuda::weight_fp8_tiles_ld(H)}
                                              : GroupedFp8Scales{sa.ptr, sb.ptr, kStride};
        gg.set_schedule(sched);
        gg.run_fp8(GroupedEpilogue::kStore, s, doff.ptr, dy.ptr, w.ptr, scales, da.ptr, nullptr,
                   DType::kBf16, nullptr);
        cuda::swiglu_bwd(da.ptr, h.ptr, doff.ptr + G, R, F, DType::kBf16, dh1.ptr, nullptr);
        gg.run_fp8(GroupedEpilogue::kSwiGLUBackward, s, doff.ptr, dy.ptr, w.ptr, scales, dh2.ptr,
                   h.ptr, DType::kBf16, nullptr);
        expect_identical(dh2.host(), dh1.host(), "dh");
      }
  gg.force_tile_n(0);
}

TEST(GroupedGemmSm90Fp8, RefusesWhatItCannotRun) {
  // Reads the shape and the pointers' alignment only: runs without a GPU.
  alignas(16) static uint8_t buf[64];
  const GroupedGemmShape ok{GroupedLayout::kRowsTimesWeightT, 2, 64, 0, 64, 64};
  EXPECT_EQ(
      GroupedGemm::fp8_unsupported_reason(ok, buf, buf, buf, GroupedEpilogue::kStore, DType::kBf16),
      "");
  // fp8_block's row GEMMs need the weight scales' tile row, at least K's blocks.
  GroupedFp8Scales block{reinterpret_cast<const float*>(buf), reinterpret_cast<const float*>(buf),
                         16, true};
  EXPECT_NE(GroupedGemm::fp8_unsupported_reason(ok, buf, buf, buf, GroupedEpilogue::kStore,
                                                DType::kBf16, &block),
            "");
  block.tiles_ld = cuda::weight_fp8_tiles_ld(ok.K);
  EXPECT_EQ(GroupedGemm::fp8_unsupported_reason(ok, buf, buf, buf, GroupedEpilogue::kStore,
                                                DType::kBf16, &block),
            "");
  GroupedGemmShape s = ok;
  s.layout = GroupedLayout::kRowsTimesWeight;
  EXPECT_NE(
      GroupedGemm::fp8_unsupported_reason(s, buf, buf, buf, GroupedEpilogue::kStore, DType::kBf16),
      "");
  s = ok;
  s.K = 72;  // rows of 72 bytes: not a 16-byte multiple
  EXPECT_NE(
      GroupedGemm::fp8_unsupported_reason(s, buf, buf, buf, GroupedEpilogue::kStore, DType::kBf16),
      "");
  EXPECT_NE(GroupedGemm::fp8_unsupported_reason(ok, buf + 8, buf, buf, GroupedEpilogue::kStore,
                                                DType::kBf16),
            "");
  EXPECT_NE(GroupedGemm::fp8_unsupported_reason(ok, buf, buf, buf, GroupedEpilogue::kSwiGLU,
                                                DType::kBf16),
            "");
}

}  // namespace
}  // namespace moe::test
