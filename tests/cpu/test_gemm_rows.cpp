// `moebench gemm --rows routed`: the rows per expert of a step's first routing, per source rank on
// the CPU backend, and the rows the busiest EP rank's experts multiply (capacity, placement,
// align).
#include <gtest/gtest.h>

#include <numeric>

#include "app/first_routing.h"
#include "app/gemm_command.h"
#include "core/error.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/cpu_ops.h"
#include "tests/common/small_workload.h"

namespace moe {
namespace {

double sum(const std::vector<float>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

TEST(GemmRows, FirstStepCountsAreEachSourcesRouting) {
  CpuDevice device(DType::kBf16);
  CpuOps ops(device);
  // Balanced routing of 320 tokens x 2 over 8 experts: 80 rows each from each source.
  const Workload balanced =
      test::small_workload({"tokens_per_rank=320", "routing.mode=balanced"}, 7);
  const std::vector<std::vector<float>> even =
      first_step_counts_by_source(balanced, 2, device, ops);
  ASSERT_EQ(even.size(), 2u);
  for (const std::vector<float>& source : even)
    for (float c : source) EXPECT_EQ(c, 80.0f);
  // The gate's routing: T * K rows from each source, drawn from its own tokens.
  const Workload learned = test::small_workload({"tokens_per_rank=320"}, 7);
  const std::vector<std::vector<float>> gate = first_step_counts_by_source(learned, 2, device, ops);
  ASSERT_EQ(gate.size(), 2u);
  EXPECT_EQ(sum(gate[0]), 640.0);
  EXPECT_EQ(sum(gate[1]), 640.0);
  EXPECT_NE(gate[0], gate[1]) << "two ranks' tokens routed alike";
}

TEST(GemmRows, TheBusiestRanksExpertsPaddedToAlign) {
  Workload w = test::small_workload({}, 7);  // 8 experts
  const std::vector<std::vector<float>> counts = {{1, 2, 3, 4, 50, 6, 7, 8},
                                                  {8, 7, 6, 5, 4, 3, 2, 1}};
  // EP 2, contiguous: rank 0's experts 0-3 get 36 rows, rank 1's 4-7 get 81.
  RoutedExpertRows r = routed_expert_rows(w, 2, counts);
  EXPECT_EQ(r.ep_rank, 1);
  EXPECT_EQ(r.rows, (std::vector<int64_t>{54, 9, 9, 9}));
  w.align = 16;
  r = routed_expert_rows(w, 2, counts);
  EXPECT_EQ(r.rows, (std::vector<int64_t>{64, 16, 16, 16}));
  // EP 1: every expert; EP 4: experts 4 and 5 (54 + 9 rows).
  w.align = 1;
  EXPECT_EQ(routed_expert_rows(w, 1, {{1, 2, 3, 4, 50, 6, 7, 8}}).rows.size(), 8u);
  r = routed_expert_rows(w, 4, {counts[0], counts[1], counts[0], counts[1]});
  EXPECT_EQ(r.ep_rank, 2);
  EXPECT_EQ(r.rows, (std::vector<int64_t>{108, 18}));
  EXPECT_THROW(routed_expert_rows(w, 2, {counts[0]}), Error);
}

TEST(GemmRows, ACapacityCapsEachSourcesRows) {
  // capacity 1.0 of 16 tokens x 2 over 8 experts: 4 rows a source may send an expert.
  Workload w = test::small_workload({"capacity_factor=1.0"}, 7);
  const RoutedExpertRows r =
      routed_expert_rows(w, 2, {{1, 2, 3, 4, 50, 6, 7, 8}, {8, 7, 6, 5, 4, 3, 2, 1}});
  // Rank 0: 1+4, 2+4, 3+4, 4+4 = 26; rank 1: 4+4, 4+3, 4+2, 4+1 = 26: the lower rank.
  EXPECT_EQ(r.ep_rank, 0);
  EXPECT_EQ(r.rows, (std::vector<int64_t>{5, 6, 7, 8}));
}

TEST(GemmRows, BalancedPlacementPlacesByTheRoutedCounts) {
  const std::vector<std::vector<float>> counts = {{40, 30, 1, 1, 1, 1, 20, 10},
                                                  {0, 0, 0, 0, 0, 0, 0, 0}};
  Workload w = test::small_workload({}, 7);
  EXPECT_EQ(routed_expert_rows(w, 2, counts).rows, (std::vector<int64_t>{40, 30, 1, 1}));
  // Largest first to the least-loaded rank: 40 | 30, 20 | 10 | the ones in turn: both ranks 52
  // rows, rank 0 holding experts 0, 2, 4 and 7.
  w = test::small_workload({"expert_placement=balanced"}, 7);
  const RoutedExpertRows r = routed_expert_rows(w, 2, counts);
  EXPECT_EQ(r.ep_rank, 0);
  EXPECT_EQ(r.rows, (std::vector<int64_t>{40, 1, 1, 10}));
}

}  // namespace
}  // namespace moe
