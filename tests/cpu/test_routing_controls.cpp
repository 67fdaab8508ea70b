// The routing controls of the workload: forced routing modes (core/routing_modes.h), capacity
// drops in the dispatch layout, align padding in the regroup, dropped rows in the combine, and
// the workload keys with their errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/layout.h"
#include "core/routing_modes.h"
#include "core/workload.h"
#include "kernels/cpu/combine.h"
#include "kernels/cpu/layout.h"
#include "kernels/cpu/permute.h"

namespace moe {
namespace {

Workload routing_workload(const std::string& mode, int64_t E, int64_t K, int64_t T) {
  Workload w;
  w.model = ModelShape{16, 8, E, K};
  w.tokens_per_rank = T;
  apply_override(w, "routing.mode=" + mode);
  w.seed = 77;
  return w;
}

std::vector<int64_t> loads(const std::vector<int32_t>& idx, int64_t E) {
  std::vector<int64_t> c(E, 0);
  for (int32_t e : idx) ++c[e];
  return c;
}

// Every mode: K distinct experts in range, ascending; a pure function of (seed, step, token), so
// that drawing the world at once equals drawing it rank by rank; a different step differs.
TEST(RoutingModes, DistinctSortedAndIndependentOfTheSplit) {
  for (const char* mode : {"uniform", "balanced", "powerlaw", "hot"}) {
    SCOPED_TRACE(mode);
    const int64_t E = 16, K = 4, N = 64;
    Workload w = routing_workload(mode, E, K, 16);
    std::vector<int32_t> all(N * K), parts(N * K), next_step(N * K);
    forced_routing(w, 3, 0, N, all.data());
    for (int64_t r = 0; r < 4; ++r) forced_routing(w, 3, r * 16, 16, parts.data() + r * 16 * K);
    EXPECT_EQ(all, parts);
    forced_routing(w, 4, 0, N, next_step.data());
    EXPECT_NE(all, next_step);
    for (int64_t t = 0; t < N; ++t) {
      const int32_t* it = all.data() + t * K;
      for (int64_t k = 0; k < K; ++k) {
        EXPECT_GE(it[k], 0);
        EXPECT_LT(it[k], E);
        if (k > 0) {
          EXPECT_LT(it[k - 1], it[k]) << "token " << t;
        }
      }
    }
  }
}

TEST(RoutingModes, BalancedGivesEveryExpertTheSameLoad) {
  Workload w = routing_workload("balanced", 8, 2, 12);  // T*K = 24 = 3 rows per expert per rank
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<int32_t> idx(12 * 2);
    forced_routing(w, 5, r * 12, 12, idx.data());
    for (int64_t c : loads(idx, 8)) EXPECT_EQ(c, 3) << "rank " << r;
  }
}

TEST(RoutingModes, PowerlawSkewFollowsThePopularityOrder) {
  const int64_t E = 16, K = 2, N = 8192;
  Workload w = routing_workload("powerlaw", E, K, N);
  w.routing.skew = 1.2;
  std::vector<int32_t> idx(N * K);
  forced_routing(w, 0, 0, N, idx.data());
  const std::vector<int64_t> c = loads(idx, E);
  const std::vector<int32_t> order = expert_popularity_order(w);
  EXPECT_EQ(std::set<int32_t>(order.begin(), order.end()).size(), size_t(E));
  // The most popular expert far above the mean, the least popular far below.
  const double mean = double(N * K) / double(E);
  EXPECT_GT(double(c[order[0]]), 2.5 * mean);
  EXPECT_LT(double(c[order[E - 1]]), 0.5 * mean);
  // Skew 0 is uniform: every expert within 15% of the mean.
  w.routing.skew = 0;
  forced_routing(w, 0, 0, N, idx.data());
  for (int64_t n : loads(idx, E)) EXPECT_NEAR(double(n), mean, 0.15 * mean);
}

TEST(RoutingModes, HotSendsTheGivenFractionToTheHotExperts) {
  const int64_t E = 32, K = 4, N = 4000;
  Workload w = routing_workload("hot", E, K, N);
  w.routing.hot_fraction = 1.0;
  w.routing.hot_experts = K;
  std::vector<int32_t> idx(N * K);
  forced_routing(w, 0, 0, N, idx.data());
  std::vector<int32_t> hot(expert_popularity_order(w));
  hot.resize(K);
  std::sort(hot.begin(), hot.end());
  for (int64_t t = 0; t < N; ++t)
    ASSERT_TRUE(std::equal(hot.begin(), hot.end(), idx.begin() + t * K)) << "token " << t;
  // A quarter of the tokens to one hot expert: it gets about N/4 + (3N/4) * K/E rows.
  w.routing.hot_fraction = 0.25;
  w.routing.hot_experts = 1;
  forced_routing(w, 0, 0, N, idx.data());
  const double want = N * 0.25 + N * 0.75 * double(K) / double(E);
  const int32_t hottest = expert_popularity_order(w)[0];
  EXPECT_NEAR(double(loads(idx, E)[hottest]), want, 0.1 * want);
}

// Capacity in the layout: at most `capacity` rows per expert, the kept ones chosen by position or
// by probability, dropped rows marked -1 and not counted, the rest still in (expert, t*K+k) order.
TEST(CapacityLayout, PositionAndProbability) {
  const int64_t T = 4, K = 2, E = 3;
  const std::vector<int32_t> idx = {0, 1, 0, 2, 0, 1, 0, 1};  // expert 0: rows 0,2,4,6; 1: 1,5,7
  const std::vector<float> p = {0.1f, 0.9f, 0.4f, 0.6f, 0.4f, 0.6f, 0.3f, 0.7f};
  std::vector<int32_t> counts(E), pos(T * K);
  cpu::dispatch_layout(idx.data(), p.data(), T, K, E, 2, true, counts.data(), pos.data());
  EXPECT_EQ(counts, (std::vector<int32_t>{2, 2, 1}));
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 2, 1, 4, -1, 3, -1, -1}));
  cpu::dispatch_layout(idx.data(), p.data(), T, K, E, 2, false, counts.data(), pos.data());
  EXPECT_EQ(counts, (std::vector<int32_t>{2, 2, 1}));
  // Expert 0 keeps p 0.4 (row 2) and 0.4 (row 4, the tie goes to the earlier row before 0.3 and
  // 0.1); expert 1 keeps 0.9 (row 1) and 0.7 (row 7).
  EXPECT_EQ(pos, (std::vector<int32_t>{-1, 2, 0, 4, 1, -1, -1, 3}));
  cpu::dispatch_layout(idx.data(), p.data(), T, K, E, 0, false, counts.data(), pos.data());
  EXPECT_EQ(counts, (std::vector<int32_t>{4, 3, 1}));
}

// Dropped rows contribute nothing to out, get dp = 0, and add nothing to dx.
TEST(CapacityCombine, DroppedRowsAreLeftOut) {
  const int64_t T = 2, K = 2, H = 3;
  const std::vector<int32_t> pos = {0, -1, -1, 1};
  const std::vector<float> y = {1, 2, 3, 4, 5, 6}, p = {0.5f, 0.25f, 0.75f, 2.0f};
  std::vector<float> out(T * H), dy(2 * H, -9.0f), dp(T * K, -9.0f), dx(T * H);
  cpu::unpermute_combine(y.data(), pos.data(), p.data(), T, K, H, DType::kFp32, out.data());
  EXPECT_EQ(out, (std::vector<float>{0.5f, 1.0f, 1.5f, 8, 10, 12}));
  const std::vector<float> dout = {1, 1, 1, 1, 0, 0};
  cpu::unpermute_combine_bwd(dout.data(), y.data(), pos.data(), p.data(), T, K, H, DType::kFp32,
                             dy.data(), dp.data());
  EXPECT_EQ(dp, (std::vector<float>{6, 0, 0, 4}));
  cpu::unpermute_sum(y.data(), pos.data(), T, K, H, dx.data());
  EXPECT_EQ(dx, (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

// Align: each local expert's expert-major block padded with zero rows; the round trip back to
// source-rank-major is exact.
TEST(AlignRegroup, PaddingRowsAreZeroAndTheRoundTripIsExact) {
  const int64_t ep = 2, El = 2, H = 2, align = 4;
  const std::vector<int32_t> counts = {1, 2, 3, 0};  // [ep, El]: expert 0 gets 1+3, expert 1 2+0
  std::vector<int64_t> off(El + 1);
  expert_major_offsets(counts.data(), ep, El, align, off.data());
  EXPECT_EQ(off, (std::vector<int64_t>{0, 4, 8}));
  std::vector<float> src(6 * H);
  std::iota(src.begin(), src.end(), 1.0f);
  std::vector<float> em(8 * H, -1.0f), back(6 * H, 0.0f);
  cpu::regroup_rows(src.data(), counts.data(), ep, El, H, align, true, em.data());
  // Expert 0: rank 0's row 0, rank 1's rows 3..5; expert 1: rank 0's rows 1..2, then 2 zero rows.
  EXPECT_EQ(em, (std::vector<float>{1, 2, 7, 8, 9, 10, 11, 12, 3, 4, 5, 6, 0, 0, 0, 0}));
  cpu::regroup_rows(em.data(), counts.data(), ep, El, H, align, false, back.data());
  EXPECT_EQ(back, src);
}

TEST(RoutingKeys, ParseDefaultsAndNull) {
  const std::string base =
      R"({"model": {"hidden": 8, "ffn": 4, "experts": 8, "topk": 2}, "tokens_per_rank": 4)";
  Workload w = workload_from_json_text(base + "}", "t");
  EXPECT_STREQ(name_of(w.routing.mode), "learned");
  EXPECT_EQ(w.capacity_factor, 0.0);
  EXPECT_EQ(w.align, 1);
  w = workload_from_json_text(base + R"(, "routing": {"mode": "hot", "hot_fraction": 0.3,
      "hot_experts": 2}, "capacity_factor": 1.25, "drop_policy": "position", "align": 16})",
                              "t");
  EXPECT_STREQ(name_of(w.routing.mode), "hot");
  EXPECT_EQ(w.routing.hot_experts, 2);
  EXPECT_EQ(w.capacity_factor, 1.25);
  EXPECT_STREQ(name_of(w.drop_policy), "position");
  EXPECT_EQ(w.align, 16);
  apply_override(w, "capacity_factor=null");
  EXPECT_EQ(w.capacity_factor, 0.0);
  EXPECT_TRUE(workload_to_json(w)["capacity_factor"].is_null());
  apply_override(w, "routing.mode=powerlaw");
  EXPECT_STREQ(name_of(w.routing.mode), "powerlaw");
}

std::string validation_error(Workload w) {
  try {
    resolve_and_validate(w, 1);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(RoutingKeys, BadValuesNameTheKey) {
  Workload w = routing_workload("hot", 8, 2, 4);
  Workload bad = w;
  bad.routing.hot_experts = 9;
  EXPECT_NE(validation_error(bad).find("routing.hot_experts"), std::string::npos);
  bad = w;
  bad.routing.hot_fraction = 1.5;
  EXPECT_NE(validation_error(bad).find("routing.hot_fraction"), std::string::npos);
  bad = w;
  bad.routing.skew = -1;
  EXPECT_NE(validation_error(bad).find("routing.skew"), std::string::npos);
  bad = w;
  bad.capacity_factor = -0.5;
  EXPECT_NE(validation_error(bad).find("capacity_factor"), std::string::npos);
  bad = w;
  bad.align = 0;
  EXPECT_NE(validation_error(bad).find("align"), std::string::npos);
  EXPECT_EQ(validation_error(w), "");
  EXPECT_THROW(workload_from_json_text(R"({"model": {"hidden": 8, "ffn": 4, "experts": 8,
      "topk": 2}, "tokens_per_rank": 4, "routing": {"mode": "hott"}})",
                                       "t"),
               UserError);
}

TEST(RoutingKeys, ExpertCapacity) {
  Workload w = routing_workload("learned", 8, 2, 100);  // T*K/E = 25
  EXPECT_EQ(expert_capacity(w), 0);
  w.capacity_factor = 1.0;
  EXPECT_EQ(expert_capacity(w), 25);
  w.capacity_factor = 1.01;
  EXPECT_EQ(expert_capacity(w), 26);
  w.capacity_factor = 1e-6;
  EXPECT_EQ(expert_capacity(w), 1);
}

}  // namespace
}  // namespace moe
