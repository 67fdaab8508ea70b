// The CPU router against float64 versions of MATH.md written here, on seeded random logits:
// scores, routing (exact), weights, loss statistics and losses; the backward against central
// finite differences of a float64 L(logits) with the routing held fixed; the input gradients
// against float64 loops. Plus hand-built cases for ties and group-limited routing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/router_losses.h"
#include "core/workload.h"
#include "kernels/cpu/router.h"
#include "tests/common/router_config.h"

namespace moe {
namespace {

using test::make_cfg;

struct Variant {
  std::string name;
  RouterConfig cfg;
  int64_t E, K;
  bool bias;
};

std::vector<Variant> variants() {
  return {
      {"softmax", make_cfg("softmax", false, false, 1.0, 1, 1), 16, 4, false},
      {"softmax_norm_scaled", make_cfg("softmax", false, true, 1.7, 1, 1), 16, 4, false},
      {"softmax_after_topk", make_cfg("softmax", true, false, 1.0, 1, 1), 16, 4, false},
      {"softmax_after_topk_norm", make_cfg("softmax", true, true, 2.0, 1, 1), 12, 3, false},
      {"sigmoid", make_cfg("sigmoid", false, false, 1.0, 1, 1), 16, 3, false},
      {"sigmoid_groups_bias", make_cfg("sigmoid", false, true, 2.5, 4, 2), 32, 6, true},
      {"softmax_groups_bias", make_cfg("softmax", false, false, 1.0, 8, 3), 64, 6, true},
      {"k_equals_e", make_cfg("softmax", false, true, 1.0, 1, 1), 8, 8, false},
      {"k_equals_e_sigmoid", make_cfg("sigmoid", false, true, 1.0, 1, 1), 8, 8, false},
  };
}

std::vector<float> random_floats(std::mt19937_64& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// ---- float64 reference of MATH.md, one token at a time ----

bool is_softmax(const RouterConfig& cfg) { return cfg.score == RouterScore::kSoftmax; }

std::vector<double> softmax64(const std::vector<double>& l) {
  double m = *std::max_element(l.begin(), l.end());
  std::vector<double> s(l.size());
  double sum = 0;
  for (size_t j = 0; j < l.size(); j++) sum += (s[j] = std::exp(l[j] - m));
  for (auto& v : s) v /= sum;
  return s;
}

double logsumexp64(const std::vector<double>& l) {
  double m = *std::max_element(l.begin(), l.end());
  double sum = 0;
  for (double v : l) sum += std::exp(v - m);
  return m + std::log(sum);
}

std::vector<double> scores64(const std::vector<double>& l, const RouterConfig& cfg) {
  if (is_softmax(cfg)) return softmax64(l);
  std::vector<double> s(l.size());
  for (size_t j = 0; j < l.size(); j++) s[j] = 1.0 / (1.0 + std::exp(-l[j]));
  return s;
}

// Ids ordered by descending value, ties lower id first (stable sort over ascending ids).
std::vector<int32_t> order_desc(const std::vector<double>& v) {
  std::vector<int32_t> ids(v.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return v[a] > v[b]; });
  return ids;
}

struct RefToken {
  std::vector<double> s;
  std::vector<int32_t> idx;
  std::vector<double> p;
  std::vector<bool> kept_group;  // [G]
};

RefToken route64(const float* logits, const float* bias, const RouterConfig& cfg, int64_t E,
                 int64_t K) {
  RefToken r;
  std::vector<double> l(logits, logits + E);
  r.s = scores64(l, cfg);
  std::vector<double> q(E);
  for (int64_t e = 0; e < E; e++) q[e] = r.s[e] + (bias ? bias[e] : 0.0);
  int64_t G = std::max<int64_t>(cfg.groups, 1), gs = E / G;
  r.kept_group.assign(G, true);
  if (G > 1) {
    std::vector<double> gscore(G);
    for (int64_t g = 0; g < G; g++) {
      std::vector<double> qg(q.begin() + g * gs, q.begin() + (g + 1) * gs);
      std::sort(qg.rbegin(), qg.rend());
      gscore[g] = std::accumulate(qg.begin(), qg.begin() + K / cfg.group_topk, 0.0);
    }
    std::vector<int32_t> gorder = order_desc(gscore);
    r.kept_group.assign(G, false);
    for (int64_t i = 0; i < cfg.group_topk; i++) r.kept_group[gorder[i]] = true;
    for (int64_t e = 0; e < E; e++) {
      if (!r.kept_group[e / gs]) q[e] = -1e300;  // unselectable
    }
  }
  std::vector<int32_t> order = order_desc(q);
  r.idx.assign(order.begin(), order.begin() + K);
  r.p.resize(K);
  if (cfg.softmax_after_topk) {
    std::vector<double> sel(K);
    for (int64_t k = 0; k < K; k++) sel[k] = l[r.idx[k]];
    r.p = softmax64(sel);
  } else {
    for (int64_t k = 0; k < K; k++) r.p[k] = r.s[r.idx[k]];
  }
  if (cfg.normalize_topk) {
    double sum = std::accumulate(r.p.begin(), r.p.end(), 0.0);
    for (auto& v : r.p) v /= (sum + 1e-20);
  }
  for (auto& v : r.p) v *= cfg.scaling;
  return r;
}

// One token's share of L = sum_k p_k dp_k + aux + z, routing fixed to idx, counts constant.
double token_loss64(const std::vector<double>& l, const int32_t* idx, const float* dp,
                    const float* counts, const RouterConfig& cfg, int64_t N, int64_t K) {
  int64_t E = int64_t(l.size());
  std::vector<double> s = scores64(l, cfg);
  std::vector<double> p(K);
  if (cfg.softmax_after_topk) {
    std::vector<double> sel(K);
    for (int64_t k = 0; k < K; k++) sel[k] = l[idx[k]];
    p = softmax64(sel);
  } else {
    for (int64_t k = 0; k < K; k++) p[k] = s[idx[k]];
  }
  if (cfg.normalize_topk) {
    double sum = std::accumulate(p.begin(), p.end(), 0.0);
    for (auto& v : p) v /= (sum + 1e-20);
  }
  double L = 0;
  for (int64_t k = 0; k < K; k++) L += cfg.scaling * p[k] * dp[k];
  std::vector<double> r = is_softmax(cfg) ? s : std::vector<double>(E);
  if (!is_softmax(cfg)) {
    double sum = std::accumulate(s.begin(), s.end(), 0.0);
    for (int64_t e = 0; e < E; e++) r[e] = s[e] / sum;
  }
  double coef = cfg.aux_coeff * double(E) / (double(K) * double(N) * double(N));
  for (int64_t e = 0; e < E; e++) L += coef * counts[e] * r[e];
  double lse = logsumexp64(l);
  L += cfg.z_coeff / double(N) * lse * lse;
  return L;
}

struct Routed {
  std::vector<float> logits, bias, scores, p;
  std::vector<int32_t> idx;
};

Routed run_forward(const Variant& v, int64_t T, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Routed r;
  r.logits = random_floats(rng, T * v.E, -3.0f, 3.0f);
  if (v.bias) r.bias = random_floats(rng, v.E, -0.1f, 0.1f);
  r.scores.resize(T * v.E);
  r.idx.resize(T * v.K);
  r.p.resize(T * v.K);
  cpu::router_topk(r.logits.data(), v.bias ? r.bias.data() : nullptr, nullptr, v.cfg, T, v.E, v.K,
                   r.scores.data(), r.idx.data(), r.p.data());
  return r;
}

TEST(RouterTest, ForwardMatchesFloat64) {
  const int64_t T = 300;
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    Routed r = run_forward(v, T, 21);
    int bad = 0;
    for (int64_t t = 0; t < T && bad < 5; t++) {
      RefToken ref = route64(&r.logits[t * v.E], v.bias ? r.bias.data() : nullptr, v.cfg, v.E, v.K);
      for (int64_t e = 0; e < v.E; e++) {
        if (std::fabs(r.scores[t * v.E + e] - ref.s[e]) > 1e-6) bad++;
        EXPECT_NEAR(r.scores[t * v.E + e], ref.s[e], 1e-6) << "t=" << t << " e=" << e;
      }
      for (int64_t k = 0; k < v.K; k++) {
        if (r.idx[t * v.K + k] != ref.idx[k]) bad++;
        EXPECT_EQ(r.idx[t * v.K + k], ref.idx[k]) << "t=" << t << " k=" << k;
        EXPECT_NEAR(r.p[t * v.K + k], ref.p[k], 1e-6 * std::max(1.0, std::fabs(ref.p[k])))
            << "t=" << t << " k=" << k;
        // Group-limited routing: never an expert outside the kept groups.
        int64_t gs = v.E / std::max<int64_t>(v.cfg.groups, 1);
        EXPECT_TRUE(ref.kept_group[r.idx[t * v.K + k] / gs]) << "t=" << t << " k=" << k;
      }
    }
  }
}

TEST(RouterTest, ExactTiesPickLowerIds) {
  // All logits equal: the first K ids, in order; with groups, the first groups too.
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    std::vector<float> logits(2 * v.E, 0.5f), scores(2 * v.E), p(2 * v.K);
    std::vector<int32_t> idx(2 * v.K);
    cpu::router_topk(logits.data(), nullptr, nullptr, v.cfg, 2, v.E, v.K, scores.data(), idx.data(),
                     p.data());
    for (int64_t k = 0; k < 2 * v.K; k++) EXPECT_EQ(idx[k], k % v.K);
  }
  // Pairs of equal logits: within each pair the lower id comes first.
  RouterConfig cfg = make_cfg("softmax", false, false, 1.0, 1, 1);
  std::vector<float> logits = {1.0f, 1.0f, 3.0f, 3.0f, 0.0f, 0.0f, 2.0f, 2.0f};
  std::vector<float> scores(8), p(5);
  std::vector<int32_t> idx(5);
  cpu::router_topk(logits.data(), nullptr, nullptr, cfg, 1, 8, 5, scores.data(), idx.data(),
                   p.data());
  EXPECT_EQ(idx, (std::vector<int32_t>{2, 3, 6, 7, 0}));
  EXPECT_EQ(p[0], p[1]);
  EXPECT_EQ(p[2], p[3]);
}

TEST(RouterTest, GroupLimitedRoutingStaysInKeptGroups) {
  // E = 16 in 4 groups of 4, keep 2 groups, K = 4 (group score = sum of its top 2).
  RouterConfig cfg = make_cfg("sigmoid", false, false, 1.0, 4, 2);
  std::vector<float> logits = {
      // token 0: expert 0 is the best overall, but group 0 scores ~1.0 against group 1's ~1.46
      // and group 2's ~1.24: experts 4, 5, 8, 9 (group 1's -1s lose to group 2's 0.5s).
      8, -8, -8, -8, 1, 1, -1, -1, 0.5f, 0.5f, 0.5f, 0.5f, 0, 0, 0, 0,
      // token 1: group 0 wins; groups 1, 2, 3 tie and the lowest id (1) is kept: group 1's 0s
      // beat group 0's -5s.
      2, 2, -5, -5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  std::vector<float> scores(32), p(8);
  std::vector<int32_t> idx(8);
  cpu::router_topk(logits.data(), nullptr, nullptr, cfg, 2, 16, 4, scores.data(), idx.data(),
                   p.data());
  EXPECT_EQ(std::vector<int32_t>(idx.begin(), idx.begin() + 4), (std::vector<int32_t>{4, 5, 8, 9}));
  EXPECT_EQ(std::vector<int32_t>(idx.begin() + 4, idx.end()), (std::vector<int32_t>{0, 1, 4, 5}));

  // A bias that lifts group 3 changes which groups are kept, but not the weights' source (s).
  std::vector<float> bias(16, 0.0f);
  for (int e = 12; e < 16; e++) bias[e] = 1.0f;
  cpu::router_topk(logits.data(), bias.data(), nullptr, cfg, 1, 16, 4, scores.data(), idx.data(),
                   p.data());
  EXPECT_EQ(std::vector<int32_t>(idx.begin(), idx.begin() + 4),
            (std::vector<int32_t>{12, 13, 14, 15}));
  EXPECT_FLOAT_EQ(p[0], 0.5f);  // sigmoid(0), unbiased
}

TEST(RouterTest, LossStatsAndLossesMatchFloat64) {
  const int64_t T = 200;
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    Routed r = run_forward(v, T, 22);
    std::vector<float> stats(2 * v.E + 1);
    cpu::router_loss_stats(r.logits.data(), r.scores.data(), r.idx.data(), v.cfg, T, v.E, v.K,
                           stats.data());
    std::vector<double> counts(v.E, 0.0), rsum(v.E, 0.0);
    double lse_sq = 0;
    for (int64_t t = 0; t < T; t++) {
      std::vector<double> l(&r.logits[t * v.E], &r.logits[(t + 1) * v.E]);
      std::vector<double> s = scores64(l, v.cfg);
      double ssum = std::accumulate(s.begin(), s.end(), 0.0);
      for (int64_t e = 0; e < v.E; e++) rsum[e] += is_softmax(v.cfg) ? s[e] : s[e] / ssum;
      for (int64_t k = 0; k < v.K; k++) counts[r.idx[t * v.K + k]] += 1;
      double lse = logsumexp64(l);
      lse_sq += lse * lse;
    }
    for (int64_t e = 0; e < v.E; e++) {
      EXPECT_EQ(stats[e], counts[e]) << "e=" << e;
      EXPECT_NEAR(stats[v.E + e], rsum[e], 1e-5 * rsum[e]) << "e=" << e;
    }
    EXPECT_NEAR(stats[2 * v.E], lse_sq, 1e-5 * lse_sq);

    // Losses from stats "summed over a world" of 3 ranks (this rank's stats times 3).
    const int64_t N = 3 * T;
    for (auto& x : stats) x *= 3;
    RouterConfig cfg = v.cfg;
    cfg.aux_coeff = 0.01;
    cfg.z_coeff = 0.001;
    double aux = 0, z = 0;
    router_losses(stats.data(), cfg, v.E, v.K, N, &aux, &z);
    double dot = 0;
    for (int64_t e = 0; e < v.E; e++) dot += 3 * counts[e] * 3 * rsum[e];
    double want_aux = 0.01 * v.E / (double(v.K) * N * N) * dot;
    double want_z = 0.001 / N * 3 * lse_sq;
    EXPECT_NEAR(aux, want_aux, 1e-5 * want_aux);
    EXPECT_NEAR(z, want_z, 1e-5 * want_z);
    // Balanced routing with uniform r gives aux = aux_coeff (the switch loss's minimum).
    if (v.name == "softmax") {
      std::vector<float> uniform(2 * v.E + 1);
      for (int64_t e = 0; e < v.E; e++) {
        uniform[e] = float(N * v.K / v.E);
        uniform[v.E + e] = float(N) / v.E;
      }
      router_losses(uniform.data(), cfg, v.E, v.K, N, &aux, &z);
      EXPECT_NEAR(aux, 0.01, 1e-9);
    }
  }
}

// Kernel dlogits against central differences of token_loss64, for the given coefficients.
// dp_scale 0 isolates the aux and z gradients (otherwise orders of magnitude smaller).
void check_backward(const Variant& v, double aux_coeff, double z_coeff, float dp_scale,
                    uint64_t seed) {
  const int64_t T = 40, N = 4 * T;  // N: the world's tokens, as if 4 ranks
  Routed r = run_forward(v, T, seed);
  RouterConfig cfg = v.cfg;
  cfg.aux_coeff = aux_coeff;
  cfg.z_coeff = z_coeff;
  std::mt19937_64 rng(seed + 1);
  std::vector<float> dp = random_floats(rng, T * v.K, -dp_scale, dp_scale);
  std::vector<float> counts(v.E);
  std::uniform_int_distribution<int> cd(0, int(2 * N * v.K / v.E));
  for (auto& c : counts) c = float(cd(rng));
  std::vector<float> dlogits(T * v.E);
  cpu::router_bwd(r.logits.data(), r.scores.data(), r.idx.data(), dp.data(), counts.data(), cfg, N,
                  T, v.E, v.K, dlogits.data());

  const double h = 1e-5;
  double diff2 = 0, ref2 = 0, max_ref = 0, max_diff = 0;
  for (int64_t t = 0; t < T; t++) {
    std::vector<double> l(&r.logits[t * v.E], &r.logits[(t + 1) * v.E]);
    for (int64_t e = 0; e < v.E; e++) {
      std::vector<double> lp = l, lm = l;
      lp[e] += h;
      lm[e] -= h;
      double fd = (token_loss64(lp, &r.idx[t * v.K], &dp[t * v.K], counts.data(), cfg, N, v.K) -
                   token_loss64(lm, &r.idx[t * v.K], &dp[t * v.K], counts.data(), cfg, N, v.K)) /
                  (2 * h);
      double d = dlogits[t * v.E + e] - fd;
      diff2 += d * d;
      ref2 += fd * fd;
      max_ref = std::max(max_ref, std::fabs(fd));
      max_diff = std::max(max_diff, std::fabs(d));
    }
  }
  double rel_l2 = std::sqrt(diff2 / ref2);
  EXPECT_GT(ref2, 0.0);
  EXPECT_LT(rel_l2, 1e-4) << "aux=" << aux_coeff << " z=" << z_coeff << " dp_scale=" << dp_scale;
  EXPECT_LT(max_diff, 1e-3 * max_ref) << "aux=" << aux_coeff << " z=" << z_coeff;
}

TEST(RouterTest, BackwardMatchesFiniteDifferences) {
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    check_backward(v, 0.0, 0.0, 1.0f, 31);
  }
}

TEST(RouterTest, BackwardWithAuxAndZ) {
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    check_backward(v, 0.01, 0.001, 1.0f, 32);
    // Only the loss terms, with coefficients large enough to dominate rounding.
    check_backward(v, 1.0, 0.0, 0.0f, 33);
    check_backward(v, 0.0, 0.1, 0.0f, 34);
    check_backward(v, 1.0, 0.1, 0.0f, 35);
  }
}

TEST(RouterTest, InputGradsMatchFloat64) {
  const int64_t T = 37, H = 70, E = 24;
  std::mt19937_64 rng(41);
  std::vector<float> x = random_floats(rng, T * H, -1, 1), w = random_floats(rng, H * E, -1, 1);
  std::vector<float> dl = random_floats(rng, T * E, -1, 1), dx0 = random_floats(rng, T * H, -1, 1);
  std::vector<float> dx = dx0, dw(H * E, 123.0f);  // dw is overwritten, not accumulated
  cpu::router_input_grads(x.data(), w.data(), dl.data(), T, H, E, dx.data(), dw.data());
  for (int64_t t = 0; t < T; t++) {
    for (int64_t h = 0; h < H; h++) {
      double want = dx0[t * H + h];
      for (int64_t e = 0; e < E; e++) want += double(dl[t * E + e]) * w[h * E + e];
      EXPECT_NEAR(dx[t * H + h], want, 1e-5 * (std::fabs(want) + 1)) << t << "," << h;
    }
  }
  for (int64_t h = 0; h < H; h++) {
    for (int64_t e = 0; e < E; e++) {
      double want = 0;
      for (int64_t t = 0; t < T; t++) want += double(x[t * H + h]) * dl[t * E + e];
      EXPECT_NEAR(dw[h * E + e], want, 1e-5 * (std::fabs(want) + 1)) << h << "," << e;
    }
  }
  // And the logits: x @ w_gate.
  std::vector<float> logits(T * E);
  cpu::router_logits(x.data(), w.data(), T, H, E, logits.data());
  for (int64_t t = 0; t < T; t++) {
    for (int64_t e = 0; e < E; e++) {
      double want = 0;
      for (int64_t h = 0; h < H; h++) want += double(x[t * H + h]) * w[h * E + e];
      EXPECT_NEAR(logits[t * E + e], want, 1e-5 * (std::fabs(want) + 1)) << t << "," << e;
    }
  }
}

}  // namespace
}  // namespace moe
