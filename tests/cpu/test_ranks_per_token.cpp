// The EP ranks a token reaches on average (dispatch/ranks_per_token.h), which alltoall_dedup's byte
// prediction and memory estimate rest on: the balanced routing mode's figure counted on
// core/routing_modes.h's own routing, the random models against a sampled routing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/routing_modes.h"
#include "core/workload.h"
#include "dispatch/ranks_per_token.h"

namespace moe {
namespace {

Workload balanced_workload(int64_t E, int64_t K, int64_t T) {
  Workload w = workload_from_json_text(R"({"model": {"hidden": 8, "ffn": 4, "experts": )" +
                                           std::to_string(E) + R"(, "topk": )" + std::to_string(K) +
                                           R"(}, "tokens_per_rank": )" + std::to_string(T) +
                                           R"(, "routing": {"mode": "balanced"}})",
                                       "t");
  return w;
}

// The mean over one rank's tokens of the distinct EP ranks their experts sit on.
double counted_ranks(const Workload& w, int64_t ep, int64_t rank, int64_t step) {
  const int64_t T = w.tokens_per_rank, K = w.model.topk, El = w.model.experts / ep;
  std::vector<int32_t> idx(T * K);
  forced_routing(w, step, rank * T, T, idx.data());
  double sum = 0;
  for (int64_t t = 0; t < T; ++t) {
    std::set<int32_t> ranks;
    for (int64_t k = 0; k < K; ++k) ranks.insert(idx[t * K + k] / int32_t(El));
    sum += double(ranks.size());
  }
  return sum / double(T);
}

TEST(RanksPerToken, BalancedIsExactWhereKAndECoprime) {
  // K coprime to E and E dividing T: every step and every rank reaches the figure exactly.
  for (auto [E, K, T] : {std::tuple<int64_t, int64_t, int64_t>{8, 3, 32}, {16, 5, 48}, {8, 1, 16}})
    for (int64_t ep : {1, 2, 4, 8}) {
      const Workload w = balanced_workload(E, K, T);
      const double want = ranks_per_token_balanced(E, K, ep);
      EXPECT_EQ(ranks_per_token(w, ep), want);
      for (int64_t step : {0, 1, 2})
        for (int64_t rank : {int64_t(0), ep - 1})
          EXPECT_EQ(counted_ranks(w, ep, rank, step), want)
              << "E " << E << " K " << K << " ep " << ep << " step " << step;
    }
  EXPECT_EQ(ranks_per_token_balanced(8, 3, 2), 1.5);  // starts 0, 1 in a block: 1; 2, 3: 2
  EXPECT_EQ(ranks_per_token_balanced(8, 3, 4), 2.0);
  EXPECT_EQ(ranks_per_token_balanced(8, 3, 8), 3.0);
  EXPECT_EQ(ranks_per_token_balanced(256, 8, 8), (25 + 2 * 7) / 32.0);
}

TEST(RanksPerToken, RandomMatchesSampledRouting) {
  struct Shape {
    int64_t E, K, ep, G, Gk;
  };
  // DeepSeek-V3's router at EP 8 and 2, no groups, one expert a rank, and groups that straddle
  // ranks (6 experts a group, 8 a rank).
  for (const Shape s : {Shape{256, 8, 8, 8, 4}, Shape{256, 8, 2, 8, 4}, Shape{128, 8, 4, 1, 1},
                        Shape{8, 2, 8, 1, 1}, Shape{24, 4, 3, 4, 2}}) {
    std::mt19937_64 rng(s.E * 1000 + s.ep);
    const int64_t g = s.E / s.G, El = s.E / s.ep, tokens = 100000;
    std::vector<int64_t> groups(s.G), pool;
    std::iota(groups.begin(), groups.end(), 0);
    double sum = 0, sum2 = 0;
    for (int64_t t = 0; t < tokens; ++t) {
      std::shuffle(groups.begin(), groups.end(), rng);
      pool.clear();
      for (int64_t j = 0; j < s.Gk; ++j)
        for (int64_t e = groups[j] * g; e < (groups[j] + 1) * g; ++e) pool.push_back(e);
      std::shuffle(pool.begin(), pool.end(), rng);
      std::set<int64_t> ranks;
      for (int64_t k = 0; k < s.K; ++k) ranks.insert(pool[k] / El);
      sum += double(ranks.size());
      sum2 += double(ranks.size()) * double(ranks.size());
    }
    const double mean = sum / tokens, sd = std::sqrt(sum2 / tokens - mean * mean);
    const double want = ranks_per_token_random(s.E, s.K, s.ep, s.G, s.Gk);
    EXPECT_NEAR(mean, want, 5 * sd / std::sqrt(double(tokens)) + 1e-12)
        << "E " << s.E << " K " << s.K << " ep " << s.ep << " G " << s.G << " Gk " << s.Gk;
  }
  // By hand: 2 of 8 experts over 4 ranks miss a rank with chance C(6,2)/C(8,2) = 15/28.
  EXPECT_NEAR(ranks_per_token_random(8, 2, 4, 1, 1), 4 * 13.0 / 28, 1e-12);
  EXPECT_EQ(ranks_per_token_random(8, 2, 1, 1, 1), 1.0);
}

TEST(RanksPerToken, FollowsTheRoutingMode) {
  Workload w = balanced_workload(256, 8, 64);
  EXPECT_EQ(ranks_per_token(w, 8), ranks_per_token_balanced(256, 8, 8));
  w.routing.mode = RoutingMode::kLearned;
  w.router.groups = 8;
  w.router.group_topk = 4;
  EXPECT_EQ(ranks_per_token(w, 8), ranks_per_token_random(256, 8, 8, 8, 4));
  // Forced modes do not go through the router's groups.
  w.routing.mode = RoutingMode::kUniform;
  EXPECT_EQ(ranks_per_token(w, 8), ranks_per_token_random(256, 8, 8, 1, 1));
  EXPECT_LT(ranks_per_token_random(256, 8, 8, 8, 4), ranks_per_token_random(256, 8, 8, 1, 1));
}

}  // namespace
}  // namespace moe
