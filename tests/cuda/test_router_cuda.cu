// The CUDA router (kernels/cuda/router.h) against its CPU twin moe::cpu::router_* on identical
// seeded inputs: routing exact (except at near ties, measured here on the CPU's selection scores),
// scores and weights within fp32 rounding, loss statistics and dlogits within summation-order
// differences; for the router variants of MATH.md, exact ties, K == E, T == 0, bad arguments,
// and bitwise determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/workload.h"
#include "kernels/cpu/router.h"
#include "kernels/cuda/router.h"
#include "tests/common/router_config.h"
#include "tests/cuda/cuda_test_util.h"

namespace moe::test {
namespace {

struct Variant {
  std::string name;
  RouterConfig cfg;
  int64_t E, K;
  bool bias;
  bool forced = false;  // the selection given (routing.mode), not computed
};

std::vector<float> uniform(int64_t n, float lo, float hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// Everything the router produces for one set of inputs, on either side.
struct RouterOut {
  std::vector<float> scores, p, stats, dlogits;
  std::vector<int32_t> idx;
};

struct RouterIn {
  int64_t T, E, K, N;
  std::vector<float> logits, bias, dp, counts;  // bias empty: none; counts [E] = world's c_e
  std::vector<int32_t> forced;                  // [T, K] or empty: the routing is computed
};

// The inputs for a variant: logits in [-4, 4], bias in [-0.1, 0.1], dp in [-1, 1]; the world is
// four ranks like this one (N = 4 T, counts = 4 x this rank's counts, taken from the CPU).
RouterIn make_inputs(const Variant& v, int64_t T, uint64_t seed) {
  RouterIn in{T, v.E, v.K, 4 * T, uniform(T * v.E, -4.0f, 4.0f, seed), {}, {}, {}};
  if (v.bias) in.bias = uniform(v.E, -0.1f, 0.1f, seed + 1);
  in.dp = uniform(T * v.K, -1.0f, 1.0f, seed + 2);
  if (v.forced) {  // K distinct random experts per token, in random order
    std::mt19937_64 rng(seed + 3);
    std::vector<int32_t> all(v.E);
    std::iota(all.begin(), all.end(), 0);
    for (int64_t t = 0; t < T; ++t) {
      std::shuffle(all.begin(), all.end(), rng);
      in.forced.insert(in.forced.end(), all.begin(), all.begin() + v.K);
    }
  }
  return in;
}

// The CPU twin: forward, statistics, and backward with the world's counts.
RouterOut run_cpu(const RouterConfig& cfg, RouterIn& in) {
  const int64_t T = in.T, E = in.E, K = in.K;
  RouterOut o;
  o.scores.resize(T * E);
  o.idx.resize(T * K);
  o.p.resize(T * K);
  o.stats.resize(2 * E + 1);
  o.dlogits.resize(T * E);
  const float* bias = in.bias.empty() ? nullptr : in.bias.data();
  const int32_t* forced = in.forced.empty() ? nullptr : in.forced.data();
  cpu::router_topk(in.logits.data(), bias, forced, cfg, T, E, K, o.scores.data(), o.idx.data(),
                   o.p.data());
  cpu::router_loss_stats(in.logits.data(), o.scores.data(), o.idx.data(), cfg, T, E, K,
                         o.stats.data());
  if (in.counts.empty()) {
    in.counts.resize(E);
    for (int64_t e = 0; e < E; ++e) in.counts[e] = 4.0f * o.stats[e];
  }
  cpu::router_bwd(in.logits.data(), o.scores.data(), o.idx.data(), in.dp.data(), in.counts.data(),
                  cfg, in.N, T, E, K, o.dlogits.data());
  return o;
}

// The GPU: router_topk from the logits; router_loss_stats and router_bwd from the CPU's scores
// and idx (`ref`), so that each kernel is compared on exactly the CPU's inputs.
RouterOut run_gpu(const RouterConfig& cfg, const RouterIn& in, const RouterOut& ref,
                  cudaStream_t stream) {
  const int64_t T = in.T, E = in.E, K = in.K;
  DevBuf<float> logits(in.logits), bias(in.bias), dp(in.dp), counts(in.counts);
  DevBuf<float> scores(T * E), p(T * K), stats(2 * E + 1), dlogits(T * E);
  DevBuf<int32_t> idx(T * K);
  DevBuf<float> ref_scores(ref.scores);
  DevBuf<int32_t> ref_idx(ref.idx), forced(in.forced);
  DevBuf<uint8_t> scratch(cuda::router_loss_stats_scratch_bytes(T, E));
  cuda::router_topk(logits.ptr, in.bias.empty() ? nullptr : bias.ptr,
                    in.forced.empty() ? nullptr : forced.ptr, cfg, T, E, K, scores.ptr, idx.ptr,
                    p.ptr, stream);
  cuda::router_loss_stats(logits.ptr, ref_scores.ptr, ref_idx.ptr, cfg, T, E, K, stats.ptr,
                          scratch.ptr, stream);
  cuda::router_bwd(logits.ptr, ref_scores.ptr, ref_idx.ptr, dp.ptr, counts.ptr, cfg, in.N, T, E, K,
                   dlogits.ptr, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return {scores.host(), p.host(), stats.host(), dlogits.host(), idx.host()};
}

double rel_gap(float a, float b) {
  const double m = std::max({std::fabs(double(a)), std::fabs(double(b)), 1e-30});
  return std::fabs(double(a) - double(b)) / m;
}

// The smallest relative gap between neighbours that decide token t's routing, from the CPU's
// selection scores q = s + bias: around the group_topk-th group score (group-limited routing),
// and between consecutive selectable experts among the first K + 1 (the order inside the top K
// and the K-th against the (K+1)-th). Below 1e-6, fp32 rounding may legitimately flip them.
double routing_gap(const float* s, const std::vector<float>& bias, const RouterConfig& cfg,
                   int64_t E, int64_t K) {
  std::vector<float> q(s, s + E);
  if (!bias.empty())
    for (int64_t e = 0; e < E; ++e) q[e] += bias[e];
  auto by_q = [&](const std::vector<float>& v) {
    return [&v](int64_t a, int64_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); };
  };
  double gap = INFINITY;
  std::vector<int64_t> selectable(E);
  std::iota(selectable.begin(), selectable.end(), 0);
  if (cfg.groups > 1) {
    const int64_t G = cfg.groups, size = E / G, per_group = K / cfg.group_topk;
    std::vector<float> group_score(G);
    for (int64_t g = 0; g < G; ++g) {
      std::vector<int64_t> order(size);
      std::iota(order.begin(), order.end(), g * size);
      std::stable_sort(order.begin(), order.end(), by_q(q));
      float sum = 0.0f;
      for (int64_t i = 0; i < per_group; ++i) sum += q[order[i]];
      group_score[g] = sum;
    }
    std::vector<int64_t> groups(G);
    std::iota(groups.begin(), groups.end(), 0);
    std::stable_sort(groups.begin(), groups.end(), by_q(group_score));
    if (cfg.group_topk < G)
      gap = rel_gap(group_score[groups[cfg.group_topk - 1]], group_score[groups[cfg.group_topk]]);
    selectable.clear();
    for (int64_t i = 0; i < cfg.group_topk; ++i)
      for (int64_t e = 0; e < size; ++e) selectable.push_back(groups[i] * size + e);
  }
  std::stable_sort(selectable.begin(), selectable.end(), by_q(q));
  for (int64_t i = 0; i < K && i + 1 < int64_t(selectable.size()); ++i)
    gap = std::min(gap, rel_gap(q[selectable[i]], q[selectable[i + 1]]));
  return gap;
}

// Counts entries with |got - want| > rel |want| + abs; prints the first few.
int64_t count_far(const std::vector<float>& got, const std::vector<float>& want, double rel,
                  double abs, const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double diff = std::fabs(double(got[i]) - double(want[i]));
    if (!(diff <= rel * std::fabs(double(want[i])) + abs)) {
      if (bad < 5) std::printf("  %s[%zu]: got %.9g want %.9g\n", what.c_str(), i, got[i], want[i]);
      ++bad;
    }
  }
  return bad;
}

// The GPU against the CPU for one variant: routing, scores, weights, statistics, dlogits.
void check_variant(const Variant& v, int64_t T, uint64_t seed, cudaStream_t stream) {
  SCOPED_TRACE(v.name + " T=" + std::to_string(T) + " E=" + std::to_string(v.E) +
               " K=" + std::to_string(v.K));
  RouterIn in = make_inputs(v, T, seed);
  const RouterOut want = run_cpu(v.cfg, in);
  const RouterOut got = run_gpu(v.cfg, in, want, stream);
  const int64_t E = v.E, K = v.K;

  // Routing: token by token; a differing row is excused only at a CPU-measured near tie.
  int64_t wrong = 0, excused = 0;
  std::vector<float> p_got, p_want;  // weights of the tokens routed alike
  for (int64_t t = 0; t < T; ++t) {
    const bool same = std::equal(got.idx.begin() + t * K, got.idx.begin() + (t + 1) * K,
                                 want.idx.begin() + t * K);
    if (same) {
      p_got.insert(p_got.end(), got.p.begin() + t * K, got.p.begin() + (t + 1) * K);
      p_want.insert(p_want.end(), want.p.begin() + t * K, want.p.begin() + (t + 1) * K);
      continue;
    }
    const double gap = routing_gap(want.scores.data() + t * E, in.bias, v.cfg, E, K);
    if (wrong + excused < 5) {
      std::printf("  %s token %lld: idx differs (gap %.3g):", v.name.c_str(), (long long)t, gap);
      for (int64_t k = 0; k < K && k < 8; ++k)
        std::printf(" %d/%d", got.idx[t * K + k], want.idx[t * K + k]);
      std::printf("\n");
    }
    if (gap < 1e-6)
      ++excused;
    else
      ++wrong;
  }
  EXPECT_EQ(wrong, 0) << "tokens routed differently away from a near tie";
  EXPECT_LE(excused, std::max<int64_t>(1, T / 100)) << "too many near ties for random logits";

  EXPECT_EQ(count_far(got.scores, want.scores, 1e-6, 1e-7, "scores"), 0);
  EXPECT_EQ(count_far(p_got, p_want, 1e-6, 1e-7, "p"), 0);
  // Counts are exact; the sums are over identical fp32 terms in double, only reordered.
  EXPECT_EQ(count_far(got.stats, want.stats, 1e-5, 0.0, "stats"), 0);
  double max_dl = 0.0;
  for (float x : want.dlogits) max_dl = std::max(max_dl, std::fabs(double(x)));
  EXPECT_GT(max_dl, 0.0);
  EXPECT_EQ(count_far(got.dlogits, want.dlogits, 0.0, 1e-5 * max_dl, "dlogits"), 0);
}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
};

constexpr int64_t kTokens = 300;

TEST(RouterCuda, Softmax) {
  MOE_REQUIRE_GPU();
  Stream stream;
  const RouterConfig cfg = make_cfg("softmax", false, false, 1.0, 1, 1);
  uint64_t seed = 10;
  for (int64_t E : {8, 64, 256})
    for (int64_t K : {2, 8})
      check_variant({"softmax", cfg, E, K, false}, kTokens, seed += 10, stream.s);
  // The widest router these kernels take: 1024 threads per block.
  check_variant({"softmax_e1024", cfg, 1024, 8, false}, 64, seed += 10, stream.s);
}

TEST(RouterCuda, SoftmaxAfterTopkNormalized) {
  MOE_REQUIRE_GPU();
  Stream stream;
  const RouterConfig cfg = make_cfg("softmax", true, true, 1.0, 1, 1);
  uint64_t seed = 100;
  for (int64_t E : {8, 64, 256})
    for (int64_t K : {2, 8})
      check_variant({"softmax_after_topk_norm", cfg, E, K, false}, kTokens, seed += 10, stream.s);
}

// DeepSeek-V3 style: sigmoid scores, 8 groups keep 4, normalized, scaled 2.5, with expert bias;
// once without and once with the aux and z losses.
TEST(RouterCuda, SigmoidGroupsBiasScaled) {
  MOE_REQUIRE_GPU();
  Stream stream;
  check_variant({"deepseek_v3", make_cfg("sigmoid", false, true, 2.5, 8, 4), 256, 8, true}, kTokens,
                200, stream.s);
  check_variant(
      {"deepseek_v3_aux_z", make_cfg("sigmoid", false, true, 2.5, 8, 4, 0.01, 0.001), 256, 8, true},
      kTokens, 210, stream.s);
  // Plain sigmoid, and groups over softmax scores with a group size that is not a warp.
  check_variant({"sigmoid", make_cfg("sigmoid", false, false, 1.0, 1, 1), 64, 2, false}, kTokens,
                220, stream.s);
  check_variant({"softmax_groups_bias", make_cfg("softmax", false, false, 1.0, 8, 2), 64, 8, true},
                kTokens, 230, stream.s);
}

// Widths around the warp-per-token kernel's chunks (E up to 256 without groups) and the block
// kernel past them, partial chunks, a sigmoid router with bias but no groups, and token counts
// that leave the last block of eight tokens partly empty. (K 1 with normalized weights is left
// out: its weights are 1 whatever the logits, so its dlogits are 0 and the variant checks little.)
TEST(RouterCuda, WarpPerTokenWidthsAndTails) {
  MOE_REQUIRE_GPU();
  Stream stream;
  const RouterConfig softmax = make_cfg("softmax", false, true, 1.0, 1, 1);
  uint64_t seed = 240;
  for (int64_t E : {33, 100, 200, 256, 257})
    check_variant({"softmax_norm", softmax, E, 6, false}, kTokens + 1, seed += 20, stream.s);
  check_variant({"sigmoid_bias", make_cfg("sigmoid", false, true, 2.5, 1, 1), 160, 8, true},
                kTokens + 3, seed += 10, stream.s);
  check_variant({"after_topk", make_cfg("softmax", true, false, 1.0, 1, 1), 96, 4, false}, 7,
                seed += 10, stream.s);
}

TEST(RouterCuda, SoftmaxAuxAndZLosses) {
  MOE_REQUIRE_GPU();
  Stream stream;
  uint64_t seed = 300;
  for (int64_t E : {8, 64, 256})
    for (int64_t K : {2, 8})
      check_variant(
          {"softmax_aux_z", make_cfg("softmax", false, false, 1.0, 1, 1, 0.01, 0.001), E, K, false},
          kTokens, seed += 10, stream.s);
  check_variant({"softmax_after_topk_aux_z",
                 make_cfg("softmax", true, true, 1.7, 1, 1, 0.01, 0.001), 64, 8, false},
                kTokens, seed += 10, stream.s);
}

// routing.mode other than learned: the selection is given; scores, weights (in the given order),
// statistics and dlogits must still match, with groups and bias ignored for the selection.
TEST(RouterCuda, ForcedSelection) {
  MOE_REQUIRE_GPU();
  Stream stream;
  check_variant(
      {"forced_softmax", make_cfg("softmax", false, false, 1.0, 1, 1), 64, 8, false, true}, kTokens,
      350, stream.s);
  check_variant({"forced_after_topk", make_cfg("softmax", true, true, 1.0, 1, 1, 0.01, 0.0), 8, 2,
                 false, true},
                kTokens, 360, stream.s);
  check_variant({"forced_deepseek", make_cfg("sigmoid", false, true, 2.5, 8, 4, 0.01, 0.001), 256,
                 8, true, true},
                kTokens, 370, stream.s);
}

TEST(RouterCuda, KEqualsE) {
  MOE_REQUIRE_GPU();
  Stream stream;
  check_variant(
      {"k_eq_e_softmax", make_cfg("softmax", false, true, 1.0, 1, 1, 0.01, 0.001), 8, 8, false},
      kTokens, 400, stream.s);
  check_variant({"k_eq_e_sigmoid", make_cfg("sigmoid", false, true, 1.0, 1, 1), 64, 64, true},
                kTokens, 410, stream.s);
  check_variant({"k_eq_e_after_topk", make_cfg("softmax", true, false, 1.0, 1, 1), 8, 8, false},
                kTokens, 420, stream.s);
}

// All logits equal: every score ties, so the lowest ids win (and, with groups, the lowest
// groups), on both sides.
TEST(RouterCuda, ExactTiesPickLowestIds) {
  MOE_REQUIRE_GPU();
  Stream stream;
  const Variant variants[] = {
      {"ties_softmax", make_cfg("softmax", false, true, 1.0, 1, 1), 64, 8, false},
      {"ties_sigmoid_groups", make_cfg("sigmoid", false, true, 2.5, 8, 4), 256, 8, false},
      {"ties_k_eq_e", make_cfg("softmax", true, false, 1.0, 1, 1), 8, 8, false},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    const int64_t T = 37;
    RouterIn in = make_inputs(v, T, 500);
    std::fill(in.logits.begin(), in.logits.end(), 0.5f);
    const RouterOut want = run_cpu(v.cfg, in);
    const RouterOut got = run_gpu(v.cfg, in, want, stream.s);
    int64_t bad = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < v.K; ++k) {
        bad += got.idx[t * v.K + k] != k;
        bad += want.idx[t * v.K + k] != k;
      }
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(count_far(got.scores, want.scores, 1e-6, 1e-7, "scores"), 0);
    EXPECT_EQ(count_far(got.p, want.p, 1e-6, 1e-7, "p"), 0);
    EXPECT_EQ(count_far(got.stats, want.stats, 1e-5, 0.0, "stats"), 0);
  }
}

// Two runs on the same inputs give the same bits: no atomics on floats, fixed reduction orders.
TEST(RouterCuda, Deterministic) {
  MOE_REQUIRE_GPU();
  Stream stream;
  const Variant variants[] = {
      {"deepseek_v3_aux_z", make_cfg("sigmoid", false, true, 2.5, 8, 4, 0.01, 0.001), 256, 8, true},
      {"softmax_after_topk_aux_z", make_cfg("softmax", true, true, 1.0, 1, 1, 0.01, 0.001), 64, 8,
       false},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    RouterIn in = make_inputs(v, 1000, 600);
    const RouterOut ref = run_cpu(v.cfg, in);
    const RouterOut a = run_gpu(v.cfg, in, ref, stream.s);
    const RouterOut b = run_gpu(v.cfg, in, ref, stream.s);
    auto same_bits = [](const auto& x, const auto& y) {
      return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0;
    };
    EXPECT_TRUE(same_bits(a.scores, b.scores));
    EXPECT_TRUE(same_bits(a.idx, b.idx));
    EXPECT_TRUE(same_bits(a.p, b.p));
    EXPECT_TRUE(same_bits(a.stats, b.stats));
    EXPECT_TRUE(same_bits(a.dlogits, b.dlogits));
  }
}

// No tokens on this rank: the statistics are zeros (as the CPU writes), the rest does nothing.
TEST(RouterCuda, NoTokens) {
  MOE_REQUIRE_GPU();
  const int64_t E = 16, K = 4;
  const RouterConfig cfg = make_cfg("softmax", false, false, 1.0, 1, 1, 0.01, 0.001);
  DevBuf<float> stats(std::vector<float>(2 * E + 1, 7.0f));
  EXPECT_EQ(cuda::router_loss_stats_scratch_bytes(0, E), 0u);
  cuda::router_topk(nullptr, nullptr, nullptr, cfg, 0, E, K, nullptr, nullptr, nullptr, 0);
  cuda::router_loss_stats(nullptr, nullptr, nullptr, cfg, 0, E, K, stats.ptr, nullptr, 0);
  cuda::router_bwd(nullptr, nullptr, nullptr, nullptr, nullptr, cfg, 0, 0, E, K, nullptr, 0);
  for (float x : stats.host()) EXPECT_EQ(x, 0.0f);
}

// Arguments the CPU twin refuses are refused here too, before any launch.
TEST(RouterCuda, RejectsBadArguments) {
  MOE_REQUIRE_GPU();
  float* none = nullptr;
  int32_t* no_idx = nullptr;
  auto topk = [&](const RouterConfig& cfg, int64_t E, int64_t K) {
    cuda::router_topk(none, none, nullptr, cfg, 1, E, K, none, no_idx, none, 0);
  };
  EXPECT_THROW(topk(make_cfg("softmax", false, false, 1.0, 1, 1), 8, 9), Error);
  EXPECT_THROW(topk(make_cfg("softmax", false, false, 1.0, 1, 1), 8, 0), Error);
  EXPECT_THROW(topk(make_cfg("softmax", false, false, 1.0, 1, 1), 1025, 2), Error);
  EXPECT_THROW(topk(make_cfg("sigmoid", true, false, 1.0, 1, 1), 8, 2), Error);
  EXPECT_THROW(topk(make_cfg("sigmoid", false, false, 1.0, 3, 1), 8, 2), Error);  // 3 !| 8
  EXPECT_THROW(topk(make_cfg("sigmoid", false, false, 1.0, 4, 5), 8, 2), Error);  // Gk > G
  EXPECT_THROW(topk(make_cfg("sigmoid", false, false, 1.0, 4, 3), 8, 4), Error);  // 3 !| K
  EXPECT_THROW(topk(make_cfg("sigmoid", false, false, 1.0, 4, 1), 8, 4), Error);  // 4 > E/G
  EXPECT_THROW(cuda::router_bwd(none, none, no_idx, none, none,
                                make_cfg("softmax", false, false, 1.0, 1, 1), 8, 8, 8, 9, none, 0),
               Error);
  CUDA_CHECK(cudaDeviceSynchronize());  // nothing was launched, so nothing failed
}

}  // namespace
}  // namespace moe::test
