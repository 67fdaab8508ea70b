// The grouped sm90 GEMM (kernels/cuda/grouped_gemm.h) against its CPU twin moe::cpu::grouped_gemm
// on seeded random data: the three layouts of the expert GEMMs, both tile widths, bf16 and fp32
// outputs, empty groups, rows and widths that are not multiples of a tile, one group and many,
// NaN rows next to a group (which the weight gradients must not read), and determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cuda/expert_ffn.h"
#include "kernels/cuda/grouped_gemm.h"
#include "tests/cuda/gemm_test_util.h"

namespace moe::test {
namespace {

using cuda::GroupedGemm;
using cuda::GroupedGemmShape;
using cuda::GroupedSchedule;

const char* layout_name(GroupedLayout l) {
  switch (l) {
    case GroupedLayout::kRowsTimesWeight:
      return "rows@W";
    case GroupedLayout::kRowsTimesWeightT:
      return "rows@W^T";
    case GroupedLayout::kRowsTTimesRows:
      return "rows^T@rows";
  }
  return "?";
}

struct Case {
  GroupedLayout layout;
  std::vector<int64_t> rows;  // per group
  int64_t M, N, K;            // the group-dependent one is ignored
  DType out;
  int tile_n;                       // 0: the kernel's choice
  int64_t spare_rows = 0;           // NaN rows after the last group (inside the TMA extent)
  GroupedSchedule sched{2, false};  // GroupedGemm::set_schedule
};

// Every schedule the kernel has: single CTAs, pairs, ping-pong.
const GroupedSchedule kSchedules[] = {{1, false}, {2, false}, {1, true}};

std::string schedule_name(const GroupedSchedule& s) {
  return s.pingpong ? "pingpong" : "cluster=" + std::to_string(s.cluster);
}

std::string label(const Case& c) {
  std::string s = std::string(layout_name(c.layout)) + " G=" + std::to_string(c.rows.size()) +
                  " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) +
                  " K=" + std::to_string(c.K) + " out=" + dtype_name(c.out) +
                  " tile_n=" + std::to_string(c.tile_n) + " " + schedule_name(c.sched) + " rows=";
  for (size_t i = 0; i < c.rows.size() && i < 8; ++i) s += std::to_string(c.rows[i]) + ",";
  return s;
}

// Runs one case on the GPU and the CPU twin; returns the GPU result.
std::vector<float> check_case(GroupedGemm& gg, const Case& c, uint64_t seed) {
  const std::string what = label(c);
  SCOPED_TRACE(what);
  const int64_t G = int64_t(c.rows.size());
  std::vector<int64_t> off(G + 1, 0);
  for (int64_t g = 0; g < G; ++g) off[g + 1] = off[g] + c.rows[g];
  const int64_t rows = off[G], alloc_rows = rows + c.spare_rows;
  const bool rows_k = c.layout == GroupedLayout::kRowsTTimesRows;
  // Row operands [alloc_rows, width]; the spare rows are NaN.
  const int64_t a_width = rows_k ? c.M : c.K;
  std::vector<float> a = random_values(alloc_rows * a_width, DType::kBf16, seed);
  std::vector<float> b = rows_k ? random_values(alloc_rows * c.N, DType::kBf16, seed + 1)
                                : random_values(G * c.K * c.N, DType::kBf16, seed + 1);
  for (int64_t i = rows * a_width; i < alloc_rows * a_width; ++i) a[i] = NAN;
  if (rows_k)
    for (int64_t i = rows * c.N; i < alloc_rows * c.N; ++i) b[i] = NAN;
  const int64_t c_elems = rows_k ? G * c.M * c.N : rows * c.N;
  StorageBuf da(DType::kBf16, a), db(DType::kBf16, b);
  StorageBuf dc(c.out, std::vector<float>(size_t(c_elems), NAN));  // every element is written
  DevBuf<int64_t> doff(off);

  GroupedGemmShape s;
  s.layout = c.layout;
  s.G = G;
  s.total_rows = alloc_rows;
  s.M = c.M;
  s.N = c.N;
  s.K = c.K;
  EXPECT_EQ(GroupedGemm::unsupported_reason(s, da.ptr, db.ptr, dc.ptr, DType::kBf16, c.out), "");
  gg.force_tile_n(c.tile_n);
  gg.set_schedule(c.sched);
  gg.run(s, doff.ptr, da.ptr, db.ptr, dc.ptr, DType::kBf16, c.out, nullptr);
  CUDA_CHECK(cudaGetLastError());
  std::vector<float> got = dc.host();

  std::vector<float> want(size_t(c_elems), 0.0f);
  cpu::grouped_gemm(c.layout, G, off.data(), c.M, c.N, c.K, a.data(), b.data(), want.data(), c.out);
  expect_close(got, want, c.out, what);
  return got;
}

const GroupedLayout kLayouts[] = {GroupedLayout::kRowsTimesWeight, GroupedLayout::kRowsTimesWeightT,
                                  GroupedLayout::kRowsTTimesRows};

TEST(GroupedGemmSm90, LayoutsTilesAndOutputs) {
  MOE_REQUIRE_SM90();
  GroupedGemm gg;
  uint64_t seed = 100;
  // Empty groups, a group of one row, tile edges (127, 128, 129), and widths past a tile.
  const std::vector<int64_t> rows = {0, 1, 127, 128, 129, 0, 300, 64};
  for (GroupedLayout l : kLayouts)
    for (int tile_n : {128, 256})
      for (DType out : {DType::kBf16, DType::kFp32})
        for (const GroupedSchedule& sched : kSchedules) {
          if (out == DType::kFp32 && l != GroupedLayout::kRowsTTimesRows) continue;
          check_case(gg, {l, rows, 200, 264, 200, out, tile_n, 0, sched}, seed++);
        }
}

TEST(GroupedGemmSm90, OneGroupAndManyGroups) {
  MOE_REQUIRE_SM90();
  GroupedGemm gg;
  uint64_t seed = 200;
  std::vector<int64_t> many(300);
  for (size_t i = 0; i < many.size(); ++i) many[i] = int64_t((i * 37) % 23);  // 0..22 rows
  for (GroupedLayout l : kLayouts)
    for (const GroupedSchedule& sched : kSchedules) {
      check_case(gg, {l, {517}, 136, 512, 328, DType::kBf16, 0, 0, sched}, seed++);
      check_case(gg, {l, many, 64, 128, 64, DType::kBf16, 0, 0, sched}, seed++);
    }
}

TEST(GroupedGemmSm90, WeightGradientsIgnoreRowsPastTheGroup) {
  MOE_REQUIRE_SM90();
  GroupedGemm gg;
  // NaN rows right after the last group, inside the tensor the kernel reads: a K stage that
  // reaches them must zero them, or every gradient of that group turns NaN.
  for (DType out : {DType::kBf16, DType::kFp32})
    for (const GroupedSchedule& sched : kSchedules)
      check_case(gg, {GroupedLayout::kRowsTTimesRows, {70, 5, 33}, 128, 256, 0, out, 0, 100, sched},
                 300);
  // In the forward they only feed rows of C that are not written.
  check_case(gg, {GroupedLayout::kRowsTimesWeight, {70, 5, 33}, 0, 256, 128, DType::kBf16, 0, 100},
             301);
}

TEST(GroupedGemmSm90, EveryGroupEmpty) {
  MOE_REQUIRE_SM90();
  GroupedGemm gg;
  // Weight gradients of experts without rows are zeros; the row layouts write nothing.
  check_case(gg, {GroupedLayout::kRowsTTimesRows, {0, 0, 0}, 64, 128, 0, DType::kFp32, 0, 8}, 400);
}

TEST(GroupedGemmSm90, ExpertFfnShapes) {
  MOE_REQUIRE_SM90();
  GroupedGemm gg;
  // The six GEMMs of a small expert FFN (H 512, F 384, 8 experts, skewed rows).
  const int64_t H = 512, F = 384;
  const std::vector<int64_t> rows = {300, 0, 45, 512, 7, 190, 256, 1};
  uint64_t seed = 500;
  check_case(gg, {GroupedLayout::kRowsTimesWeight, rows, 0, 2 * F, H, DType::kBf16, 0}, seed++);
  check_case(gg, {GroupedLayout::kRowsTimesWeight, rows, 0, H, F, DType::kBf16, 0}, seed++);
  check_case(gg, {GroupedLayout::kRowsTimesWeightT, rows, 0, F, H, DType::kBf16, 0}, seed++);
  check_case(gg, {GroupedLayout::kRowsTimesWeightT, rows, 0, H, 2 * F, DType::kBf16, 0}, seed++);
  for (DType out : {DType::kBf16, DType::kFp32}) {
    check_case(gg, {GroupedLayout::kRowsTTimesRows, rows, F, H, 0, out, 0}, seed++);
    check_case(gg, {GroupedLayout::kRowsTTimesRows, rows, H, 2 * F, 0, out, 0}, seed++);
  }
}

TEST(GroupedGemmSm90, Deterministic) {
  MOE_REQUIRE_SM90();
  GroupedGemm gg;
  for (GroupedLayout l : kLayouts) {
    const Case c{l, {130, 0, 257}, 192, 320, 192, DType::kFp32, 0};
    Case cb = c;
    if (l != GroupedLayout::kRowsTTimesRows) cb.out = DType::kBf16;
    const std::vector<float> first = check_case(gg, cb, 600);
    const std::vector<float> second = check_case(gg, cb, 600);
    expect_identical(second, first, std::string("second run ") + layout_name(l));
    // A pair sharing B's stages multiplies each tile in the same order as a lone CTA, and so
    // does a ping-pong warpgroup on its 128-column tiles.
    cb.sched = {1, false};
    const std::vector<float> alone = check_case(gg, cb, 600);
    expect_identical(alone, first, std::string("cluster 1 against 2 ") + layout_name(l));
    cb.sched = {1, true};
    const std::vector<float> pingpong = check_case(gg, cb, 600);
    expect_identical(pingpong, first, std::string("ping-pong against cluster 2 ") + layout_name(l));
  }
}

// The up projection with SwiGLU in its epilogue writes the same h, and the same a as the SwiGLU
// kernel run on that h, bit for bit: ragged rows, empty experts, F a multiple of 128.
TEST(GroupedGemmSm90, SwigluEpilogueMatchesTheSeparateKernel) {
  MOE_REQUIRE_SM90();
  GroupedGemm gg;
  const int64_t H = 192, F = 384;
  const std::vector<int64_t> off = offsets_of({0, 130, 1, 257, 0, 64});
  const int64_t G = int64_t(off.size()) - 1, R = off[G];
  StorageBuf x(DType::kBf16, random_values(R * H, DType::kBf16, 700));
  StorageBuf w(DType::kBf16, random_values(G * H * 2 * F, DType::kBf16, 701));
  StorageBuf h1(DType::kBf16, R * 2 * F), a1(DType::kBf16, R * F);
  StorageBuf h2(DType::kBf16, R * 2 * F), a2(DType::kBf16, R * F);
  DevBuf<int64_t> doff(off);
  const GroupedGemmShape s{GroupedLayout::kRowsTimesWeight, G, R, 0, 2 * F, H};
  const auto kFused = cuda::GroupedEpilogue::kSwiGLU;
  ASSERT_EQ(GroupedGemm::fused_unsupported_reason(s, kFused, DType::kBf16), "");
  gg.run(s, doff.ptr, x.ptr, w.ptr, h1.ptr, DType::kBf16, DType::kBf16, nullptr);
  cuda::swiglu_fwd(h1.ptr, doff.ptr + G, R, F, DType::kBf16, a1.ptr, nullptr);
  for (const GroupedSchedule& sched : kSchedules) {  // ping-pong: the cooperative kernel
    SCOPED_TRACE(schedule_name(sched));
    gg.set_schedule(sched);
    gg.run_fused(kFused, s, doff.ptr, x.ptr, w.ptr, h2.ptr, a2.ptr, DType::kBf16, DType::kBf16,
                 nullptr);
    expect_identical(h2.host(), h1.host(), "h");
    expect_identical(a2.host(), a1.host(), "a");
  }
  GroupedGemmShape odd = s;
  odd.N = 2 * 200;  // F not a multiple of 128: refused, so the caller runs the two kernels
  EXPECT_NE(GroupedGemm::fused_unsupported_reason(odd, kFused, DType::kBf16), "");
  EXPECT_NE(GroupedGemm::fused_unsupported_reason(s, kFused, DType::kFp32), "");
}

// The data gradient da = dy @ w_out^T with SwiGLU's backward in its epilogue writes the same dh
// as the separate backward kernel run on the stored da, bit for bit: ragged rows, empty experts,
// F a multiple of 8 only (a partial last tile and box), both tile widths.
TEST(GroupedGemmSm90, SwigluBackwardEpilogueMatchesTheSeparateKernel) {
  MOE_REQUIRE_SM90();
  GroupedGemm gg;
  const int64_t H = 192;
  const std::vector<int64_t> off = offsets_of({0, 130, 1, 257, 0, 64});
  const int64_t G = int64_t(off.size()) - 1, R = off[G];
  const auto kFused = cuda::GroupedEpilogue::kSwiGLUBackward;
  uint64_t seed = 710;
  for (int64_t F : {int64_t(384), int64_t(200), int64_t(104)})
    for (int tile_n : {128, 256, 0}) {
      // 0: 128-column tiles by ping-pong.
      const GroupedSchedule sched{tile_n == 256 ? 2 : 1, tile_n == 0};
      SCOPED_TRACE("F=" + std::to_string(F) + " tile_n=" + std::to_string(tile_n) + " " +
                   schedule_name(sched));
      gg.set_schedule(sched);
      StorageBuf dy(DType::kBf16, random_values(R * H, DType::kBf16, seed++));
      StorageBuf w(DType::kBf16, random_values(G * F * H, DType::kBf16, seed++));
      StorageBuf h(DType::kBf16, random_values(R * 2 * F, DType::kBf16, seed++));
      StorageBuf da(DType::kBf16, R * F), dh1(DType::kBf16, R * 2 * F),
          dh2(DType::kBf16, R * 2 * F);
      DevBuf<int64_t> doff(off);
      const GroupedGemmShape s{GroupedLayout::kRowsTimesWeightT, G, R, 0, F, H};
      ASSERT_EQ(GroupedGemm::fused_unsupported_reason(s, kFused, DType::kBf16), "");
      gg.force_tile_n(tile_n);
      gg.run(s, doff.ptr, dy.ptr, w.ptr, da.ptr, DType::kBf16, DType::kBf16, nullptr);
      cuda::swiglu_bwd(da.ptr, h.ptr, doff.ptr + G, R, F, DType::kBf16, dh1.ptr, nullptr);
      gg.run_fused(kFused, s, doff.ptr, dy.ptr, w.ptr, dh2.ptr, h.ptr, DType::kBf16, DType::kBf16,
                   nullptr);
      expect_identical(dh2.host(), dh1.host(), "dh");
    }
  gg.force_tile_n(0);
  const GroupedGemmShape up{GroupedLayout::kRowsTimesWeight, G, R, 0, 256, H};
  EXPECT_NE(GroupedGemm::fused_unsupported_reason(up, kFused, DType::kBf16), "");
}

// Adding into fp32 weight gradients (accumulation over calls): C0 + the product, one fp32
// add per element, bitwise, in every schedule and tile width; other layouts and bf16 refused.
TEST(GroupedGemmSm90, AddsIntoFp32WeightGradients) {
  MOE_REQUIRE_SM90();
  GroupedGemm gg;
  const auto kAdd = cuda::GroupedEpilogue::kAdd;
  const std::vector<int64_t> off = offsets_of({0, 130, 1, 257, 0, 64});
  const int64_t G = int64_t(off.size()) - 1, R = off[G], M = 200, N = 264;
  StorageBuf a(DType::kBf16, random_values(R * M, DType::kBf16, 800));
  StorageBuf b(DType::kBf16, random_values(R * N, DType::kBf16, 801));
  const std::vector<float> c0 = random_values(G * M * N, DType::kFp32, 802);
  DevBuf<int64_t> doff(off);
  const GroupedGemmShape s{GroupedLayout::kRowsTTimesRows, G, R, M, N, 0};
  ASSERT_EQ(GroupedGemm::fused_unsupported_reason(s, kAdd, DType::kFp32), "");
  StorageBuf prod(DType::kFp32, G * M * N);
  gg.run(s, doff.ptr, a.ptr, b.ptr, prod.ptr, DType::kBf16, DType::kFp32, nullptr);
  const std::vector<float> p = prod.host();
  std::vector<float> want(p.size());
  for (size_t i = 0; i < p.size(); ++i) want[i] = c0[i] + p[i];
  for (const GroupedSchedule& sched : kSchedules)
    for (int tile_n : {128, 256}) {
      SCOPED_TRACE(schedule_name(sched) + " tile_n=" + std::to_string(tile_n));
      gg.set_schedule(sched);
      gg.force_tile_n(tile_n);
      StorageBuf c(DType::kFp32, c0);
      gg.run_fused(kAdd, s, doff.ptr, a.ptr, b.ptr, c.ptr, nullptr, DType::kBf16, DType::kFp32,
                   nullptr);
      expect_identical(c.host(), want, "C0 + the product");
    }
  gg.force_tile_n(0);
  EXPECT_NE(GroupedGemm::fused_unsupported_reason(s, kAdd, DType::kBf16), "");
  const GroupedGemmShape up{GroupedLayout::kRowsTimesWeight, G, R, 0, 256, 192};
  EXPECT_NE(GroupedGemm::fused_unsupported_reason(up, kAdd, DType::kFp32), "");
}

TEST(GroupedGemmSm90, RefusesWhatItCannotRun) {
  GroupedGemmShape s;
  s.layout = GroupedLayout::kRowsTimesWeight;
  s.G = 4;
  s.total_rows = 100;
  s.N = 100;  // not a multiple of 8
  s.K = 64;
  alignas(16) static char buf[64];
  EXPECT_NE(GroupedGemm::unsupported_reason(s, buf, buf, buf, DType::kBf16, DType::kBf16), "");
  s.N = 128;
  EXPECT_EQ(GroupedGemm::unsupported_reason(s, buf, buf, buf, DType::kBf16, DType::kBf16), "");
  EXPECT_NE(GroupedGemm::unsupported_reason(s, buf, buf, buf, DType::kFp32, DType::kFp32), "");
  EXPECT_NE(GroupedGemm::unsupported_reason(s, buf + 2, buf, buf, DType::kBf16, DType::kBf16), "");
  s.G = GroupedGemm::kMaxGroups + 1;
  EXPECT_NE(GroupedGemm::unsupported_reason(s, buf, buf, buf, DType::kBf16, DType::kBf16), "");
}

}  // namespace
}  // namespace moe::test
