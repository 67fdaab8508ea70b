#include "core/routing_modes.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/init.h"

namespace moe {
namespace {

// hashed_uniform streams of core/init.cpp are 1..6; these stay clear of them.
constexpr uint64_t kRoutingStream = 7, kPopularityStream = 8;

// Independent uniform draws in (0, 1] for one token at one step.
struct TokenDraws {
  uint64_t seed, stream, token;
  double operator()(uint64_t j) const {
    const double v = hashed_uniform(seed, stream, (token << 20) | j);  // in [-1, 1), 2^-23 steps
    return (v + 1.0 + 0x1p-23) * 0.5;
  }
  // Uniform integer in [0, n).
  int64_t below(uint64_t j, int64_t n) const {
    return std::min<int64_t>(n - 1, int64_t((*this)(j) * double(n)));
  }
};

// m distinct values of [0, n) (Floyd's algorithm: m draws, no rejection loop), appended to out
// through map(). Draws j0, j0 + 1, ... of `draws`.
template <typename Map>
void distinct_uniform(const TokenDraws& draws, uint64_t j0, int64_t n, int64_t m, Map map,
                      std::vector<int32_t>& out) {
  const size_t first = out.size();
  for (int64_t j = n - m; j < n; ++j) {
    const int32_t r = int32_t(map(draws.below(j0 + uint64_t(j - (n - m)), j + 1)));
    const bool seen = std::find(out.begin() + first, out.end(), r) != out.end();
    out.push_back(seen ? int32_t(map(j)) : r);
  }
}

}  // namespace

bool routing_is_forced(const Workload& w) { return w.routing.mode != RoutingMode::kLearned; }

int64_t expert_capacity(const Workload& w) {
  if (w.capacity_factor <= 0) return 0;
  // Each chunk of a pipelined step is dispatched on its own, so its tokens are the batch.
  const double tokens = double(w.tokens_per_rank / step_chunks(w));
  const double rows = w.capacity_factor * tokens * double(w.model.topk) / double(w.model.experts);
  return std::max<int64_t>(1, int64_t(std::ceil(rows)));
}

std::vector<int32_t> expert_popularity_order(const Workload& w) {
  const int64_t E = w.model.experts;
  std::vector<int32_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  // Fisher-Yates from the seed alone: the same order at every step and on every rank.
  for (int64_t i = E - 1; i > 0; --i) {
    const double u = (hashed_uniform(w.seed, kPopularityStream, uint64_t(i)) + 1.0) * 0.5;
    std::swap(order[i], order[std::min<int64_t>(i, int64_t(u * double(i + 1)))]);
  }
  return order;
}

void forced_routing(const Workload& w, int64_t step, int64_t token_begin, int64_t num_tokens,
                    int32_t* idx) {
  const RoutingMode mode = w.routing.mode;
  const int64_t E = w.model.experts, K = w.model.topk;
  MOE_CHECK(routing_is_forced(w), "forced_routing called for routing.mode = " << name_of(mode));
  const uint64_t stream = kRoutingStream | (uint64_t(step) << 8);
  const std::vector<int32_t> order = expert_popularity_order(w);
  std::vector<double> weight(E), key(E);
  for (int64_t r = 0; r < E; ++r) weight[order[r]] = std::pow(double(r + 1), -w.routing.skew);
  const int64_t hot = std::min(w.routing.hot_experts, K);
  // The shift of "balanced" is one draw per step, shared by every token.
  const int64_t shift = TokenDraws{w.seed, stream, uint64_t(1) << 43}.below(0, E);
  std::vector<int32_t> chosen, by_key(E);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t g = token_begin + t;
    const TokenDraws draws{w.seed, stream, uint64_t(g)};
    chosen.clear();
    if (mode == RoutingMode::kUniform) {
      distinct_uniform(
          draws, 0, E, K, [](int64_t i) { return i; }, chosen);
    } else if (mode == RoutingMode::kBalanced) {
      for (int64_t k = 0; k < K; ++k) chosen.push_back(int32_t((g * K + k + shift) % E));
    } else if (mode == RoutingMode::kPowerlaw) {
      // Weighted sampling without replacement: the K largest u^(1/w), compared as log(u) / w.
      for (int64_t e = 0; e < E; ++e) key[e] = std::log(draws(uint64_t(e))) / weight[e];
      std::iota(by_key.begin(), by_key.end(), 0);
      std::partial_sort(
          by_key.begin(), by_key.begin() + K, by_key.end(),
          [&](int32_t a, int32_t b) { return key[a] > key[b] || (key[a] == key[b] && a < b); });
      chosen.assign(by_key.begin(), by_key.begin() + K);
    } else if (mode == RoutingMode::kHot) {
      const int64_t h = w.routing.hot_experts;
      if (draws(0) <= w.routing.hot_fraction) {
        distinct_uniform(
            draws, 1, h, hot, [&](int64_t i) { return order[i]; }, chosen);
        distinct_uniform(
            draws, 1 + uint64_t(hot), E - h, K - hot, [&](int64_t i) { return order[h + i]; },
            chosen);
      } else {
        distinct_uniform(
            draws, 1, E, K, [](int64_t i) { return i; }, chosen);
      }
    } else {
      MOE_CHECK(false, "unknown routing.mode " << name_of(mode));
    }
    std::sort(chosen.begin(), chosen.end());
    std::copy(chosen.begin(), chosen.end(), idx + t * K);
  }
}

}  // namespace moe
