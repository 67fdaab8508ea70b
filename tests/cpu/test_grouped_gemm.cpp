// cpu::grouped_gemm (the CPU twin of the grouped sm90 kernel) against float64 sums in each layout,
// with empty groups; and the balanced shapes `moebench gemm` times.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "app/gemm_command.h"
#include "core/bf16.h"
#include "kernels/cpu/gemm.h"

namespace moe {
namespace {

std::vector<float> bf16_values(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = round_to_bf16(dist(rng));
  return v;
}

// C in float64 straight from the layout's definition (core/grouped_gemm.h).
std::vector<double> reference(GroupedLayout layout, const std::vector<int64_t>& off, int64_t M,
                              int64_t N, int64_t K, const std::vector<float>& A,
                              const std::vector<float>& B) {
  const int64_t G = int64_t(off.size()) - 1;
  const bool rows_k = layout == GroupedLayout::kRowsTTimesRows;
  std::vector<double> C(size_t(rows_k ? G * M * N : off[G] * N), 0.0);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t r = off[g]; r < off[g + 1]; ++r)
      for (int64_t n = 0; n < N; ++n) {
        if (rows_k) {
          for (int64_t m = 0; m < M; ++m)
            C[g * M * N + m * N + n] += double(A[r * M + m]) * B[r * N + n];
        } else {
          double s = 0;
          for (int64_t k = 0; k < K; ++k)
            s += double(A[r * K + k]) * (layout == GroupedLayout::kRowsTimesWeight
                                             ? B[g * K * N + k * N + n]
                                             : B[g * N * K + n * K + k]);
          C[r * N + n] = s;
        }
      }
  return C;
}

TEST(GroupedGemmCpu, EveryLayoutMatchesFloat64) {
  const std::vector<int64_t> off = {0, 0,  5,
                                    5, 37, 38};  // empty groups first, between and none last
  const int64_t G = 5, R = off[G], M = 7, N = 12, K = 9;
  for (GroupedLayout layout : {GroupedLayout::kRowsTimesWeight, GroupedLayout::kRowsTimesWeightT,
                               GroupedLayout::kRowsTTimesRows}) {
    const bool rows_k = layout == GroupedLayout::kRowsTTimesRows;
    const std::vector<float> A = bf16_values(R * (rows_k ? M : K), 1);
    const std::vector<float> B = bf16_values(rows_k ? R * N : G * K * N, 2);
    const std::vector<double> want = reference(layout, off, M, N, K, A, B);
    std::vector<float> got(want.size(), NAN);  // every element must be written
    cpu::grouped_gemm(layout, G, off.data(), rows_k ? M : 0, N, rows_k ? 0 : K, A.data(), B.data(),
                      got.data(), DType::kFp32);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i])))
          << "layout " << int(layout) << " element " << i;
  }
}

TEST(GroupedTiles, RowsRoundUpToWholeTiles) {
  const float counts[] = {0, 1, 128, 129, 300};
  GroupedTileRows one(true, 1);
  EXPECT_DOUBLE_EQ(one.over_rows(), 0);  // nothing routed yet
  one.add(counts, 5);
  EXPECT_DOUBLE_EQ(one.over_rows(), (0 + 128 + 128 + 256 + 384) / 558.0);
  one.add(counts, 5);  // steps sum
  EXPECT_DOUBLE_EQ(one.over_rows(), (0 + 128 + 128 + 256 + 384) / 558.0);
  // Two FSDP groups: each expert's rank takes half its world count (64.5 rows: one 64-row tile
  // and a second).
  const float world[] = {129};
  GroupedTileRows halves(true, 2, 64);
  halves.add(world, 1);
  EXPECT_DOUBLE_EQ(halves.over_rows(), 128 / 64.5);
  // With a capacity the counts hold dropped rows: unknown.
  GroupedTileRows capped(false, 1);
  capped.add(counts, 5);
  EXPECT_DOUBLE_EQ(capped.over_rows(), 0);
}

TEST(GemmBenchShapes, BalancedRowsSumToTheRanksRowsAndAlign) {
  Workload w;
  w.model.experts = 8;
  w.model.topk = 2;
  w.tokens_per_rank = 1001;
  w.align = 1;
  std::vector<int64_t> rows = balanced_expert_rows(w, 2);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(std::accumulate(rows.begin(), rows.end(), int64_t(0)), 2002);
  EXPECT_EQ(
      *std::max_element(rows.begin(), rows.end()) - *std::min_element(rows.begin(), rows.end()), 1);
  w.align = 16;
  for (int64_t r : balanced_expert_rows(w, 1)) EXPECT_EQ(r % 16, 0);
}

}  // namespace
}  // namespace moe
