// Expert placement (core/placement.h): every placement is a permutation giving each EP rank
// E / ep experts in ascending order; balanced evens out the rows per rank where contiguous does
// not, and every rank computes the same one from the same loads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "core/placement.h"

namespace moe::test {
namespace {

void expect_valid(const Placement& p, int64_t E, int64_t ep) {
  ASSERT_EQ(int64_t(p.expert_of_slot.size()), E);
  ASSERT_EQ(int64_t(p.slot_of_expert.size()), E);
  for (int64_t g = 0; g < E; ++g) {
    const int32_t e = p.expert_of_slot[size_t(g)];
    ASSERT_TRUE(0 <= e && e < E) << "slot " << g;
    EXPECT_EQ(p.slot_of_expert[size_t(e)], g) << "expert " << e;
    if (g % (E / ep) > 0) {
      EXPECT_LT(p.expert_of_slot[size_t(g - 1)], e) << "slot " << g;
    }
  }
}

std::vector<int32_t> in_order(int32_t E) {
  std::vector<int32_t> v(size_t(E), 0);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(Placement, ContiguousIsTheIdentity) {
  const Placement p = contiguous_placement(16);
  expect_valid(p, 16, 4);
  EXPECT_EQ(p.expert_of_slot, in_order(16));
}

TEST(Placement, BalancedSplitsTwoHotExperts) {
  // Contiguous puts both hot experts on rank 0 (20 rows against 2); balanced one on each.
  const std::vector<double> load = {10, 10, 1, 1};
  const Placement p = balanced_placement(load, 2);
  expect_valid(p, 4, 2);
  EXPECT_EQ(p.expert_of_slot, (std::vector<int32_t>{0, 2, 1, 3}));
  EXPECT_DOUBLE_EQ(rank_load_max_over_mean(contiguous_placement(4), load, 2), 20.0 / 11.0);
  EXPECT_DOUBLE_EQ(rank_load_max_over_mean(p, load, 2), 1.0);
  EXPECT_EQ(rank_loads(p, load, 2), (std::vector<double>{11, 11}));
}

TEST(Placement, BalancedBeatsContiguousOnRandomLoadsAndIsDeterministic) {
  std::mt19937_64 rng(7);
  for (int64_t E : {8, 64, 256})
    for (int64_t ep : {2, 4, 8}) {
      std::lognormal_distribution<double> rows(5.0, 0.8);
      std::vector<double> load(static_cast<size_t>(E));
      for (double& v : load) v = std::round(rows(rng));
      const Placement p = balanced_placement(load, ep);
      expect_valid(p, E, ep);
      const double balanced = rank_load_max_over_mean(p, load, ep);
      EXPECT_LE(balanced, rank_load_max_over_mean(contiguous_placement(E), load, ep))
          << "E=" << E << " ep=" << ep;
      // Largest first to the least loaded rank: no rank exceeds the mean by more than one
      // expert's load, unless slots run out (a rank full of light experts).
      const std::vector<double> sums = rank_loads(p, load, ep);
      const double mean = std::accumulate(sums.begin(), sums.end(), 0.0) / double(ep);
      if (E / ep >= 4) {
        EXPECT_LE(*std::max_element(sums.begin(), sums.end()),
                  mean + *std::max_element(load.begin(), load.end()))
            << "E=" << E << " ep=" << ep;
      }
      EXPECT_EQ(balanced_placement(load, ep).expert_of_slot, p.expert_of_slot);
    }
}

TEST(Placement, EqualLoadsAreDealtRoundRobin) {
  const std::vector<double> flat(12, 3.0);
  // Equal loads are dealt round-robin: rank r gets r, r + ep, ...
  const Placement p = balanced_placement(flat, 3);
  expect_valid(p, 12, 3);
  EXPECT_EQ(p.expert_of_slot, (std::vector<int32_t>{0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}));
  EXPECT_DOUBLE_EQ(rank_load_max_over_mean(p, std::vector<double>(12, 0.0), 3), 1.0);
}

// place_by_counts places only where the workload asks for balanced at ep > 1, and then says how
// even the rows were either way.
TEST(Placement, ByCountsOnlyWhereTheWorkloadPlaces) {
  const float counts[4] = {5, 1, 9, 2};
  Workload w;
  w.model.experts = 4;
  w.mesh.ep = 2;
  const PlacedExperts kept = place_by_counts(w, counts);
  EXPECT_EQ(kept.placement.expert_of_slot, in_order(4));
  EXPECT_EQ(kept.contiguous_load, 0.0);
  EXPECT_EQ(kept.placed_load, 0.0);
  w.expert_placement = ExpertPlacement::kBalanced;
  const PlacedExperts placed = place_by_counts(w, counts);
  expect_valid(placed.placement, 4, 2);
  EXPECT_EQ(placed.placement.expert_of_slot, (std::vector<int32_t>{1, 2, 0, 3}));
  EXPECT_DOUBLE_EQ(placed.contiguous_load, 11.0 / 8.5);  // {6, 11} against mean 8.5
  EXPECT_DOUBLE_EQ(placed.placed_load, 10.0 / 8.5);      // {10, 7}
  w.mesh.ep = 1;
  EXPECT_EQ(place_by_counts(w, counts).placement.expert_of_slot, in_order(4));
}

}  // namespace
}  // namespace moe::test
