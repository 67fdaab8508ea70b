// The float64 reference: its gradients against central finite differences of its own loss (with
// the routing held fixed), its routing rules on hand-made logits, the near-tie adoption, and the
// MPI wrapper on a 1-rank world.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "core/init.h"
#include "core/mesh.h"
#include "core/parallel.h"
#include "core/reference.h"

namespace moe {
namespace {

std::vector<double> uniform(std::mt19937_64& rng, int64_t n, double scale) {
  std::uniform_real_distribution<double> d(-scale, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

ReferenceProblem random_problem(const RouterConfig& rc, int64_t N, int64_t H, int64_t F, int64_t E,
                                int64_t K, uint64_t seed) {
  std::mt19937_64 rng(seed);
  ReferenceProblem prob;
  prob.tokens = N;
  prob.model = ModelShape{H, F, E, K};
  prob.router = rc;
  prob.x = uniform(rng, N * H, 1.0);
  prob.dout = uniform(rng, N * H, 1.0);
  prob.w_gate = uniform(rng, H * E, 1.0);
  prob.expert_bias = uniform(rng, E, 0.1);
  prob.w_in = uniform(rng, E * H * 2 * F, 1.0 / std::sqrt(double(H)));
  prob.w_out = uniform(rng, E * F * H, 1.0 / std::sqrt(double(F)));
  return prob;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Central differences of reference_loss at `count` entries of `param` (a vector inside prob),
// compared with the analytic gradient `grad` to 1e-6 of the gradient's largest entry. `pick`
// chooses the entries, so that expert weights are sampled from experts the routing uses.
template <typename Pick>
void check_fd(ReferenceProblem& prob, std::vector<double>& param, const std::vector<double>& grad,
              const std::vector<int32_t>& idx, const char* what, int count, Pick pick,
              const uint8_t* dropped = nullptr) {
  ASSERT_EQ(param.size(), grad.size()) << what;
  const double scale = std::max(max_abs(grad), 1e-6);
  for (int i = 0; i < count; ++i) {
    const int64_t j = pick(i);
    const double v = param[j];
    const double eps = 1e-6 * std::max(1.0, std::fabs(v));
    param[j] = v + eps;
    const double lp = reference_loss(prob, idx.data(), dropped);
    param[j] = v - eps;
    const double lm = reference_loss(prob, idx.data(), dropped);
    param[j] = v;
    const double fd = (lp - lm) / (2 * eps);
    EXPECT_NEAR(fd, grad[j], 1e-6 * scale) << what << "[" << j << "]";
  }
}

void check_gradients(const RouterConfig& rc, int64_t K, bool zero_dout = false) {
  const int64_t N = 5, H = 8, F = 6, E = 8;
  ReferenceProblem prob = random_problem(rc, N, H, F, E, K, 42);
  if (zero_dout) std::fill(prob.dout.begin(), prob.dout.end(), 0.0);
  ReferenceResult res = reference_step(prob, nullptr, nullptr, 0, N, 0, E);
  ASSERT_EQ(int64_t(res.idx.size()), N * K);
  const std::vector<int32_t> idx = res.idx;
  EXPECT_NEAR(reference_loss(prob, idx.data()), res.loss,
              1e-12 * std::max(1.0, std::fabs(res.loss)));
  if (rc.aux_coeff != 0) {
    EXPECT_GT(res.aux, 0);
  }
  if (rc.z_coeff != 0) {
    EXPECT_GT(res.z, 0);
  }

  std::mt19937_64 rng(7);
  auto any = [&](int64_t n) { return [&rng, n](int) { return int64_t(rng() % uint64_t(n)); }; };
  // An entry of a routed expert's [rows, cols] block: the others have zero gradient.
  auto routed = [&](int64_t block) {
    return [&rng, &idx, block](int) {
      const int64_t e = idx[rng() % idx.size()];
      return e * block + int64_t(rng() % uint64_t(block));
    };
  };
  check_fd(prob, prob.x, res.dx, idx, "dx", 16, any(N * H));
  check_fd(prob, prob.w_gate, res.dw_gate, idx, "dw_gate", 16, any(H * E));
  if (zero_dout) {
    EXPECT_EQ(max_abs(res.dw_in), 0.0);
    EXPECT_EQ(max_abs(res.dw_out), 0.0);
    return;
  }
  check_fd(prob, prob.w_in, res.dw_in, idx, "dw_in", 16, routed(H * 2 * F));
  check_fd(prob, prob.w_out, res.dw_out, idx, "dw_out", 16, routed(F * H));
}

// Capacity drops: with the routing and the drops held fixed, the gradients are those of the loss
// without the dropped rows (their weights still count in normalize_topk and in aux).
TEST(ReferenceGrad, CapacityDropsByProbability) {
  RouterConfig rc;
  rc.normalize_topk = true;
  rc.aux_coeff = 0.05;
  const int64_t N = 8, H = 8, F = 6, E = 4, K = 2;
  ReferenceProblem prob = random_problem(rc, N, H, F, E, K, 43);
  prob.capacity = 2;  // per group of 4 tokens: 8 rows over 4 experts, so some expert overflows
  prob.capacity_group = 4;
  ReferenceResult res = reference_step(prob, nullptr, nullptr, 0, N, 0, E);
  int64_t dropped = 0;
  for (uint8_t d : res.dropped) dropped += d;
  EXPECT_GT(dropped, 0);
  // Each group sends each expert at most `capacity` rows, and keeps its largest p.
  for (int64_t g = 0; g < N; g += 4)
    for (int64_t e = 0; e < E; ++e) {
      int64_t kept = 0;
      double min_kept = INFINITY, max_dropped = -INFINITY;
      for (int64_t i = g * K; i < (g + 4) * K; ++i) {
        if (res.idx[i] != e) continue;
        kept += !res.dropped[i];
        if (res.dropped[i])
          max_dropped = std::max(max_dropped, res.p[i]);
        else
          min_kept = std::min(min_kept, res.p[i]);
      }
      EXPECT_LE(kept, 2);
      EXPECT_GE(min_kept, max_dropped) << "group " << g << " expert " << e;
    }
  const std::vector<int32_t> idx = res.idx;
  const uint8_t* drops = res.dropped.data();
  EXPECT_NEAR(reference_loss(prob, idx.data(), drops), res.loss,
              1e-12 * std::max(1.0, std::fabs(res.loss)));
  std::mt19937_64 rng(9);
  auto any = [&](int64_t n) { return [&rng, n](int) { return int64_t(rng() % uint64_t(n)); }; };
  check_fd(prob, prob.x, res.dx, idx, "dx", 16, any(N * H), drops);
  check_fd(prob, prob.w_gate, res.dw_gate, idx, "dw_gate", 16, any(H * E), drops);
  check_fd(prob, prob.w_in, res.dw_in, idx, "dw_in", 16, any(E * H * 2 * F), drops);
  check_fd(prob, prob.w_out, res.dw_out, idx, "dw_out", 16, any(E * F * H), drops);
}

// Shared experts: every token through each at weight 1, added to out. With the routing fixed, the
// gradients of x and of the shared weights are those of reference_loss; the shared part of out is
// the SwiGLU FFN written out here; and the own tokens' dw_sh of two halves sum to the whole's.
TEST(ReferenceGrad, SharedExperts) {
  RouterConfig rc;
  rc.normalize_topk = true;
  rc.aux_coeff = 0.01;
  const int64_t N = 5, H = 8, F = 6, E = 8, K = 2, S = 2, Fs = 5;
  ReferenceProblem prob = random_problem(rc, N, H, F, E, K, 45);
  ReferenceResult routed_only = reference_step(prob, nullptr, nullptr, 0, N, 0, E);
  EXPECT_TRUE(routed_only.dw_sh_in.empty());
  std::mt19937_64 rng(46);
  prob.model.shared_experts = S;
  prob.model.shared_ffn = Fs;
  prob.w_sh_in = uniform(rng, S * H * 2 * Fs, 1.0 / std::sqrt(double(H)));
  prob.w_sh_out = uniform(rng, S * Fs * H, 1.0 / std::sqrt(double(Fs)));
  ReferenceResult res = reference_step(prob, nullptr, nullptr, 0, N, 0, E);
  ASSERT_EQ(int64_t(res.dw_sh_in.size()), S * H * 2 * Fs);
  ASSERT_EQ(int64_t(res.dw_sh_out.size()), S * Fs * H);
  EXPECT_EQ(res.idx, routed_only.idx);
  for (int64_t t = 0; t < N; ++t)
    for (int64_t o = 0; o < H; ++o) {
      double y = 0;
      for (int64_t s = 0; s < S; ++s)
        for (int64_t f = 0; f < Fs; ++f) {
          double g = 0, u = 0;
          for (int64_t i = 0; i < H; ++i) {
            g += prob.x[t * H + i] * prob.w_sh_in[(s * H + i) * 2 * Fs + f];
            u += prob.x[t * H + i] * prob.w_sh_in[(s * H + i) * 2 * Fs + Fs + f];
          }
          y += g / (1 + std::exp(-g)) * u * prob.w_sh_out[(s * Fs + f) * H + o];
        }
      EXPECT_NEAR(res.out[t * H + o], routed_only.out[t * H + o] + y, 1e-12) << t << ", " << o;
    }
  const std::vector<int32_t> idx = res.idx;
  EXPECT_NEAR(reference_loss(prob, idx.data()), res.loss,
              1e-12 * std::max(1.0, std::fabs(res.loss)));
  auto any = [&](int64_t n) { return [&rng, n](int) { return int64_t(rng() % uint64_t(n)); }; };
  check_fd(prob, prob.x, res.dx, idx, "dx", 16, any(N * H));
  check_fd(prob, prob.w_sh_in, res.dw_sh_in, idx, "dw_sh_in", 16, any(S * H * 2 * Fs));
  check_fd(prob, prob.w_sh_out, res.dw_sh_out, idx, "dw_sh_out", 16, any(S * Fs * H));
  check_fd(prob, prob.w_gate, res.dw_gate, idx, "dw_gate", 8, any(H * E));
  const ReferenceResult a = reference_step(prob, nullptr, nullptr, 0, 2, 0, E);
  const ReferenceResult b = reference_step(prob, nullptr, nullptr, 2, N, 0, E);
  for (int64_t i = 0; i < S * H * 2 * Fs; ++i)
    EXPECT_NEAR(a.dw_sh_in[i] + b.dw_sh_in[i], res.dw_sh_in[i], 1e-12);
  for (int64_t i = 0; i < S * Fs * H; ++i)
    EXPECT_NEAR(a.dw_sh_out[i] + b.dw_sh_out[i], res.dw_sh_out[i], 1e-12);
}

// The backend's drops are adopted only where they differ at a near tie in p; by position there
// are no ties, and any difference is an error.
TEST(ReferenceCapacity, BackendDropsAdoptedOnlyAtNearTies) {
  RouterConfig rc;
  const int64_t N = 4, H = 4, F = 2, E = 2, K = 1;
  ReferenceProblem prob = random_problem(rc, N, H, F, E, K, 44);
  // Every token to expert 0 with nearly equal p: w_gate column 1 far below column 0, and x rows
  // equal up to a tiny perturbation.
  for (int64_t h = 0; h < H; ++h) {
    prob.w_gate[h * E + 0] = 1.0;
    prob.w_gate[h * E + 1] = -1.0;
  }
  for (int64_t t = 0; t < N; ++t)
    for (int64_t h = 0; h < H; ++h) prob.x[t * H + h] = 0.5 + 1e-7 * double(t);
  prob.capacity = 2;
  prob.capacity_group = N;
  ReferenceResult ref = reference_step(prob, nullptr, nullptr, 0, N, 0, E);
  ASSERT_EQ(ref.dropped, (std::vector<uint8_t>{1, 1, 0, 0}));  // larger x, larger p: kept
  const std::vector<int32_t> got_idx(N, 0);
  const std::vector<uint8_t> swapped = {0, 1, 1, 0};
  ReferenceResult res = reference_step(prob, got_idx.data(), swapped.data(), 0, N, 0, E);
  EXPECT_EQ(res.drop_mismatches, 0);
  EXPECT_EQ(res.drop_near_ties, 2);
  EXPECT_EQ(res.dropped, swapped);
  const std::vector<uint8_t> too_many = {0, 0, 0, 0};
  res = reference_step(prob, got_idx.data(), too_many.data(), 0, N, 0, E);
  EXPECT_EQ(res.drop_mismatches, 2);
  prob.drop_by_position = true;
  ref = reference_step(prob, nullptr, nullptr, 0, N, 0, E);
  EXPECT_EQ(ref.dropped, (std::vector<uint8_t>{0, 0, 1, 1}));
  res = reference_step(prob, got_idx.data(), swapped.data(), 0, N, 0, E);
  EXPECT_EQ(res.drop_mismatches, 2);
}

TEST(ReferenceGrad, Softmax) {
  RouterConfig rc;
  check_gradients(rc, 2);
}

TEST(ReferenceGrad, SoftmaxNormalizeScaling) {
  RouterConfig rc;
  rc.normalize_topk = true;
  rc.scaling = 1.7;
  check_gradients(rc, 4);
}

TEST(ReferenceGrad, SoftmaxAfterTopk) {
  RouterConfig rc;
  rc.softmax_after_topk = true;
  rc.scaling = 1.5;
  check_gradients(rc, 2);
}

TEST(ReferenceGrad, SigmoidGroupsNormalizeScalingBias) {
  RouterConfig rc;
  rc.score = RouterScore::kSigmoid;
  rc.groups = 4;
  rc.group_topk = 2;
  rc.normalize_topk = true;
  rc.scaling = 2.5;
  rc.expert_bias = true;
  check_gradients(rc, 4);
}

TEST(ReferenceGrad, SoftmaxAuxZ) {
  RouterConfig rc;
  rc.aux_coeff = 0.01;
  rc.z_coeff = 0.001;
  check_gradients(rc, 2);
}

// With dout = 0 the loss is aux + z alone, so their gradients are not hidden under the experts'.
TEST(ReferenceGrad, SoftmaxAuxZOnly) {
  RouterConfig rc;
  rc.aux_coeff = 1.0;
  rc.z_coeff = 0.5;
  check_gradients(rc, 2, /*zero_dout=*/true);
}

TEST(ReferenceGrad, SigmoidAuxZOnly) {
  RouterConfig rc;
  rc.score = RouterScore::kSigmoid;
  rc.aux_coeff = 1.0;
  rc.z_coeff = 0.5;
  check_gradients(rc, 2, /*zero_dout=*/true);
}

TEST(ReferenceRouting, ExactTiesPickLowerIds) {
  RouterConfig rc;
  const std::vector<double> flat(8, 0.25);
  TokenRouting r = reference_route_token(rc, 8, 3, flat.data(), nullptr);
  EXPECT_EQ(r.idx, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE(r.near_tie);

  const std::vector<double> logits = {1.0, 2.0, 0.0, 2.0, -1.0, 2.0, 0.5, 1.0};
  r = reference_route_token(rc, 8, 2, logits.data(), nullptr);
  EXPECT_EQ(r.idx, (std::vector<int32_t>{1, 3}));
  r = reference_route_token(rc, 8, 4, logits.data(), nullptr);
  EXPECT_EQ(r.idx, (std::vector<int32_t>{1, 3, 5, 0}));
  EXPECT_TRUE(r.near_tie);  // expert 0 beat expert 7 (both 1.0) only by id
}

TEST(ReferenceRouting, SortedByDescendingScoreAndGathered) {
  RouterConfig rc;
  rc.score = RouterScore::kSigmoid;
  const std::vector<double> logits = {-1.0, 3.0, 0.5, 2.0};
  TokenRouting r = reference_route_token(rc, 4, 2, logits.data(), nullptr);
  EXPECT_EQ(r.idx, (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(r.p[0], 1.0 / (1.0 + std::exp(-3.0)), 1e-15);
  EXPECT_NEAR(r.p[1], 1.0 / (1.0 + std::exp(-2.0)), 1e-15);
  EXPECT_FALSE(r.near_tie);
  // The bias moves the selection but not the weights.
  rc.expert_bias = true;
  const std::vector<double> bias = {0.0, 0.0, 0.5, 0.0};
  r = reference_route_token(rc, 4, 2, logits.data(), bias.data());
  EXPECT_EQ(r.idx, (std::vector<int32_t>{2, 1}));
  EXPECT_NEAR(r.p[0], 1.0 / (1.0 + std::exp(-0.5)), 1e-15);
}

TEST(ReferenceRouting, GroupLimitedStaysInKeptGroups) {
  RouterConfig rc;
  rc.score = RouterScore::kSigmoid;
  rc.groups = 4;
  rc.group_topk = 2;
  // Groups of 2, K/Gk = 2: a group's score is the sum of both. Expert 0 has the best single
  // score but its group {0, 1} sums lower than groups 1 and 2.
  const std::vector<double> logits = {5.0, -5.0, 1.0, 1.0, 0.5, 0.5, -1.0, -1.0};
  TokenRouting r = reference_route_token(rc, 8, 4, logits.data(), nullptr);
  EXPECT_EQ(r.idx, (std::vector<int32_t>{2, 3, 4, 5}));

  // Tied group scores keep the lower group ids.
  const std::vector<double> tied = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  r = reference_route_token(rc, 8, 4, tied.data(), nullptr);
  EXPECT_EQ(r.idx, (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(ReferenceRouting, GroupLimitedRandom) {
  std::mt19937_64 rng(3);
  for (RouterScore score : {RouterScore::kSoftmax, RouterScore::kSigmoid}) {
    RouterConfig rc;
    rc.score = score;
    rc.groups = 4;
    rc.group_topk = 2;
    const int64_t E = 16, K = 4, per = 4;
    for (int trial = 0; trial < 200; ++trial) {
      const std::vector<double> logits = uniform(rng, E, 3.0);
      TokenRouting r = reference_route_token(rc, E, K, logits.data(), nullptr);
      // Group score: the sum of the group's top K/Gk = 2 scores (no bias here, so q = s).
      std::vector<double> q(E);
      reference_scores(rc, E, logits.data(), q.data());
      std::vector<std::pair<double, int>> groups;
      for (int g = 0; g < 4; ++g) {
        std::vector<double> v(q.begin() + g * per, q.begin() + (g + 1) * per);
        std::sort(v.rbegin(), v.rend());
        groups.push_back({-(v[0] + v[1]), g});
      }
      std::sort(groups.begin(), groups.end());
      const std::set<int> kept = {groups[0].second, groups[1].second};
      for (int32_t e : r.idx) EXPECT_TRUE(kept.count(e / per)) << "expert " << e;
      EXPECT_EQ(std::set<int32_t>(r.idx.begin(), r.idx.end()).size(), size_t(K));
    }
  }
}

TEST(ReferenceRouting, SoftmaxAfterTopkSumsToScaling) {
  const std::vector<double> logits = {0.3, -1.2, 2.0, 0.7, 1.1, -0.4};
  for (bool normalize : {false, true}) {
    RouterConfig rc;
    rc.softmax_after_topk = true;
    rc.normalize_topk = normalize;
    rc.scaling = 2.5;
    TokenRouting r = reference_route_token(rc, 6, 3, logits.data(), nullptr);
    EXPECT_EQ(r.idx, (std::vector<int32_t>{2, 4, 3}));
    const double z = std::exp(2.0) + std::exp(1.1) + std::exp(0.7);
    EXPECT_NEAR(r.p[0], 2.5 * std::exp(2.0) / z, 1e-14);
    EXPECT_NEAR(r.p[0] + r.p[1] + r.p[2], 2.5, 1e-14);
  }
}

TEST(ReferenceRouting, NormalizeSumsToScaling) {
  RouterConfig rc;
  rc.score = RouterScore::kSigmoid;
  rc.normalize_topk = true;
  rc.scaling = 1.5;
  const std::vector<double> logits = {0.3, -1.2, 2.0, 0.7, 1.1, -0.4};
  TokenRouting r = reference_route_token(rc, 6, 2, logits.data(), nullptr);
  EXPECT_NEAR(r.p[0] + r.p[1], 1.5, 1e-14);
}

// One selected expert, normalized: p is the scaling whatever the logits, so the gradient into
// them is exactly 0 (a rounding's noise there made the check call dw_gate 100% wrong against a
// backend that gave 0), with either score function and with the softmax after the top-k.
TEST(ReferenceRouting, NormalizedTopOneHasExactlyZeroGradient) {
  const std::vector<double> logits = {0.3, -1.2, 2.0, 0.7, 1.1, -0.4};
  for (RouterScore score : {RouterScore::kSoftmax, RouterScore::kSigmoid})
    for (bool after : {false, true}) {
      RouterConfig rc;
      rc.score = score;
      rc.softmax_after_topk = after && score == RouterScore::kSoftmax;
      rc.normalize_topk = true;
      rc.scaling = 2.5;
      TokenRouting r = reference_route_token(rc, 6, 1, logits.data(), nullptr);
      EXPECT_EQ(r.p[0], 2.5);
      const double dp = 0.731;
      std::vector<double> dlogits(6, 0.0);
      reference_topk_weights_bwd(rc, 6, 1, logits.data(), r.idx.data(), &dp, dlogits.data());
      EXPECT_EQ(dlogits, std::vector<double>(6, 0.0))
          << "sigmoid " << (score == RouterScore::kSigmoid) << " after " << rc.softmax_after_topk;
    }
}

// A problem whose logits are exactly x: H = E and w_gate = identity.
ReferenceProblem identity_gate_problem(const RouterConfig& rc,
                                       const std::vector<std::vector<double>>& logits, int64_t K) {
  const int64_t N = int64_t(logits.size()), E = int64_t(logits[0].size()), F = 3;
  ReferenceProblem prob = random_problem(rc, N, E, F, E, K, 5);
  std::fill(prob.w_gate.begin(), prob.w_gate.end(), 0.0);
  for (int64_t e = 0; e < E; ++e) prob.w_gate[e * E + e] = 1.0;
  for (int64_t t = 0; t < N; ++t) std::copy(logits[t].begin(), logits[t].end(), &prob.x[t * E]);
  return prob;
}

TEST(ReferenceNearTie, AdoptsOnlyAtNearTies) {
  RouterConfig rc;
  const int64_t K = 2;
  const std::vector<std::vector<double>> logits = {
      {2.0, 1.0, 0.9999, -1.0},  // experts 1 and 2 within 1e-4 relative: a near tie
      {2.0, 1.0, 0.0, -1.0},     // a clear margin
      {2.0, 1.0, 0.0, -1.0},
      {2.0, 1.0, 0.9999, -1.0}};
  ReferenceProblem prob = identity_gate_problem(rc, logits, K);
  const std::vector<int32_t> got = {2, 0,   // near tie, other set: adopted in the backend's order
                                    0, 2,   // clear margin, other set: a mismatch
                                    1, 0,   // the same set in another order: agrees
                                    0, 0};  // near tie but not a valid set: a mismatch
  ReferenceResult res = reference_step(prob, got.data(), nullptr, 0, 4, 0, 4);
  EXPECT_EQ(res.routing_near_ties, 1);
  EXPECT_EQ(res.routing_mismatches, 2);
  EXPECT_EQ(std::vector<int32_t>(res.idx.begin(), res.idx.begin() + 2),
            (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(std::vector<int32_t>(res.idx.begin() + 2, res.idx.end()),
            (std::vector<int32_t>{0, 1, 0, 1, 0, 1}));
  // Adopted weights are the reference's float64 scores at the backend's experts.
  std::vector<double> s(4);
  reference_scores(rc, 4, logits[0].data(), s.data());
  EXPECT_NEAR(res.p[0], s[2], 1e-15);
  EXPECT_NEAR(res.p[1], s[0], 1e-15);
  // And the step is the fixed-routing function of the adopted routing.
  EXPECT_NEAR(reference_loss(prob, res.idx.data()), res.loss, 1e-12);
}

TEST(ReferenceNearTie, RejectsAnUnrelatedSwapAtANearTie) {
  RouterConfig rc;
  // Experts 1 and 2 tie at the K boundary; expert 3 is far below. A backend that drops expert 1
  // for expert 3 is wrong even though this token has a near tie.
  ReferenceProblem prob = identity_gate_problem(rc, {{2.0, 1.0, 0.9999, -1.0}}, 2);
  const std::vector<int32_t> got = {0, 3};
  ReferenceResult res = reference_step(prob, got.data(), nullptr, 0, 1, 0, 4);
  EXPECT_EQ(res.routing_near_ties, 0);
  EXPECT_EQ(res.routing_mismatches, 1);
  // Swapping in the tied expert 2 but dropping the clear winner 0 is just as wrong.
  const std::vector<int32_t> got2 = {2, 1};
  res = reference_step(prob, got2.data(), nullptr, 0, 1, 0, 4);
  EXPECT_EQ(res.routing_near_ties, 0);
  EXPECT_EQ(res.routing_mismatches, 1);
}

TEST(ReferenceNearTie, AdoptedSoftmaxAfterTopkWeights) {
  RouterConfig rc;
  rc.softmax_after_topk = true;
  ReferenceProblem prob = identity_gate_problem(rc, {{2.0, 1.0, 0.9999, -1.0}}, 2);
  const std::vector<int32_t> got = {0, 2};
  ReferenceResult res = reference_step(prob, got.data(), nullptr, 0, 1, 0, 4);
  EXPECT_EQ(res.routing_near_ties, 1);
  const double z = std::exp(2.0) + std::exp(0.9999);
  EXPECT_NEAR(res.p[0], std::exp(2.0) / z, 1e-15);
  EXPECT_NEAR(res.p[1], std::exp(0.9999) / z, 1e-15);
}

TEST(ReferenceNearTie, GroupScoreNearTie) {
  RouterConfig rc;
  rc.score = RouterScore::kSigmoid;
  rc.groups = 4;
  rc.group_topk = 2;
  // One expert per group counts (K/Gk = 1); groups 1 and 2 are within 1e-4, while the selectable
  // experts' K-th and (K+1)-th scores (s(2) and s(-5)) are far apart.
  ReferenceProblem prob =
      identity_gate_problem(rc, {{3.0, -5.0, 2.0, -5.0, 1.9999, -5.0, -3.0, -5.0}}, 2);
  const std::vector<int32_t> got = {0, 4};
  ReferenceResult res = reference_step(prob, got.data(), nullptr, 0, 1, 0, 8);
  EXPECT_EQ(res.routing_near_ties, 1);
  EXPECT_EQ(res.routing_mismatches, 0);
  EXPECT_EQ(res.idx, got);
}

// Splitting the tokens and experts as ranks do reproduces the whole step.
TEST(ReferenceSplit, PartsSumToWhole) {
  RouterConfig rc;
  rc.aux_coeff = 0.1;
  rc.z_coeff = 0.01;
  const int64_t N = 6, H = 8, F = 6, E = 8, K = 2;
  ReferenceProblem prob = random_problem(rc, N, H, F, E, K, 9);
  ReferenceResult whole = reference_step(prob, nullptr, nullptr, 0, N, 0, E);
  std::vector<double> dw_gate(H * E, 0.0);
  double dot = 0;
  for (int part = 0; part < 2; ++part) {
    const int64_t tb = part * 3, eb = part * 4;
    ReferenceResult r = reference_step(prob, nullptr, nullptr, tb, tb + 3, eb, eb + 4);
    for (int64_t i = 0; i < 3 * H; ++i) {
      EXPECT_DOUBLE_EQ(r.out[i], whole.out[tb * H + i]);
      EXPECT_DOUBLE_EQ(r.dx[i], whole.dx[tb * H + i]);
      dot += r.out[i] * prob.dout[tb * H + i];
    }
    for (int64_t i = 0; i < 4 * H * 2 * F; ++i)
      EXPECT_DOUBLE_EQ(r.dw_in[i], whole.dw_in[eb * H * 2 * F + i]);
    for (int64_t i = 0; i < 4 * F * H; ++i)
      EXPECT_DOUBLE_EQ(r.dw_out[i], whole.dw_out[eb * F * H + i]);
    for (int64_t i = 0; i < H * E; ++i) dw_gate[i] += r.dw_gate[i];
    EXPECT_DOUBLE_EQ(r.aux, whole.aux);
    EXPECT_DOUBLE_EQ(r.z, whole.z);
  }
  for (int64_t i = 0; i < H * E; ++i) EXPECT_NEAR(dw_gate[i], whole.dw_gate[i], 1e-12);
  EXPECT_NEAR(dot + whole.aux + whole.z, whole.loss, 1e-12);
}

// The split by expert (compute_reference at more than one rank): each "rank" computes its experts'
// rows of every token, the world's parts are summed (here by hand, over two rounds), and each
// rank's own tokens and experts come out as the whole step's, in bf16 and FP8 (whose operands are
// whole experts' rows either way).
TEST(ReferenceSplit, ByExpertSumsToWhole) {
  RouterConfig rc;
  rc.aux_coeff = 0.1;
  const int64_t N = 8, H = 8, F = 6, E = 8, K = 2, W = 2;
  for (Precision precision : {Precision::kBf16, Precision::kFp8Tensor}) {
    ReferenceProblem prob = random_problem(rc, N, H, F, E, K, 13);
    prob.precision = precision;
    const ReferenceResult whole = reference_step(prob, nullptr, nullptr, 0, N, 0, E);
    std::vector<double> sum_out(N * H, 0.0), sum_dp(N * K, 0.0), sum_dx(N * H, 0.0);
    auto math = cpu_reference_math(prob);
    for (int64_t r = 0; r < W; ++r)  // round 1: each rank's part, added up
      reference_step(
          prob, *math, nullptr, nullptr, r * N / W, (r + 1) * N / W, r * E / W, (r + 1) * E / W, {},
          [&](std::vector<double>& out, std::vector<double>& dp, std::vector<double>& dx) {
            for (int64_t i = 0; i < N * H; ++i) sum_out[i] += out[i], sum_dx[i] += dx[i];
            for (int64_t i = 0; i < N * K; ++i) sum_dp[i] += dp[i];
          });
    for (int64_t r = 0; r < W; ++r) {  // round 2: the sums as the all-reduce gives them
      const int64_t tb = r * N / W, te = (r + 1) * N / W, eb = r * E / W, ee = (r + 1) * E / W;
      const ReferenceResult part = reference_step(
          prob, *math, nullptr, nullptr, tb, te, eb, ee, {},
          [&](std::vector<double>& out, std::vector<double>& dp, std::vector<double>& dx) {
            out = sum_out;
            dp = sum_dp;
            dx = sum_dx;
          });
      for (int64_t i = 0; i < (te - tb) * H; ++i) {
        EXPECT_NEAR(part.out[i], whole.out[tb * H + i], 1e-12) << name_of(precision);
        EXPECT_NEAR(part.dx[i], whole.dx[tb * H + i], 1e-12) << name_of(precision);
      }
      for (int64_t i = 0; i < (ee - eb) * H * 2 * F; ++i)
        EXPECT_EQ(part.dw_in[i], whole.dw_in[eb * H * 2 * F + i]) << name_of(precision);
      for (int64_t i = 0; i < (ee - eb) * F * H; ++i)
        EXPECT_EQ(part.dw_out[i], whole.dw_out[eb * F * H + i]) << name_of(precision);
    }
  }
}

// The check's way: each local expert's gradients handed over as it is finished, once, in expert
// order, equal to those written whole; an expert no row reaches gets zeros; the rest unchanged.
TEST(ReferenceSplit, ExpertGradSinkGivesEachLocalExpertOnce) {
  RouterConfig rc;
  const int64_t N = 4, H = 8, F = 6, E = 16, K = 2;  // 8 rows: some experts get none
  const ReferenceProblem prob = random_problem(rc, N, H, F, E, K, 12);
  const int64_t eb = 3, ee = 14;
  const ReferenceResult whole = reference_step(prob, nullptr, nullptr, 0, N, eb, ee);
  std::vector<int64_t> seen;
  int64_t empty = 0;
  auto sink = [&](int64_t e, const double* dw_in, const double* dw_out) {
    seen.push_back(e);
    const int64_t el = e - eb;
    bool zero = true;
    for (int64_t i = 0; i < H * 2 * F; ++i) {
      EXPECT_EQ(dw_in[i], whole.dw_in[el * H * 2 * F + i]) << "expert " << e << " at " << i;
      zero = zero && dw_in[i] == 0.0;
    }
    for (int64_t i = 0; i < F * H; ++i)
      EXPECT_EQ(dw_out[i], whole.dw_out[el * F * H + i]) << "expert " << e << " at " << i;
    empty += zero;
  };
  auto math = cpu_reference_math(prob);
  const ReferenceResult sunk = reference_step(prob, *math, nullptr, nullptr, 0, N, eb, ee, sink);
  std::vector<int64_t> expected(ee - eb);
  for (int64_t e = eb; e < ee; ++e) expected[e - eb] = e;
  EXPECT_EQ(seen, expected);
  EXPECT_GT(empty, 0) << "the problem should leave some local expert without rows";
  EXPECT_TRUE(sunk.dw_in.empty());
  EXPECT_TRUE(sunk.dw_out.empty());
  EXPECT_EQ(sunk.out, whole.out);
  EXPECT_EQ(sunk.dx, whole.dx);
  EXPECT_EQ(sunk.dw_gate, whole.dw_gate);
  EXPECT_EQ(sunk.loss, whole.loss);
}

// The float64 loops split their outputs over threads (for_each_range); each element keeps its
// one-thread sum, so any number of threads gives the same bits, bf16 and FP8 alike. The shapes
// are large enough for the loops to take several parts.
TEST(ReferenceThreads, ResultsDoNotDependOnTheThreadCount) {
  RouterConfig rc;
  const int64_t N = 16, H = 512, F = 1024, E = 2, K = 1;
  for (Precision precision : {Precision::kBf16, Precision::kFp8Block}) {
    ReferenceProblem prob = random_problem(rc, N, H, F, E, K, 21);
    prob.precision = precision;
    max_parts() = 1;
    const ReferenceResult one = reference_step(prob, nullptr, nullptr, 0, N, 0, E);
    max_parts() = 7;
    // An expert's 8 rows take 2 parts in h = x @ w_in and dx.
    EXPECT_GT(part_count(int64_t(8) * H * 2 * F, int64_t(1) << 22), 1);
    const ReferenceResult many = reference_step(prob, nullptr, nullptr, 0, N, 0, E);
    max_parts() = 0;
    EXPECT_GT(max_abs(one.dw_in), 0.0);
    EXPECT_EQ(one.out, many.out) << name_of(precision);
    EXPECT_EQ(one.dx, many.dx) << name_of(precision);
    EXPECT_EQ(one.dw_in, many.dw_in) << name_of(precision);
    EXPECT_EQ(one.dw_out, many.dw_out) << name_of(precision);
    EXPECT_EQ(one.dw_gate, many.dw_gate) << name_of(precision);
  }
}

TEST(ParallelRanges, EachIndexOnceInOrderedParts) {
  max_parts() = 5;
  std::vector<int> hits(1000, 0);
  std::atomic<int> calls{0};
  for_each_range(1000, int64_t(1) << 22, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[i];
    ++calls;
  });
  max_parts() = 0;
  EXPECT_EQ(calls.load(), 5);
  for (int h : hits) EXPECT_EQ(h, 1);
  int small_calls = 0;
  for_each_range(1000, 1, [&](int64_t b, int64_t e) {  // 1000 multiply-adds: one part
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 1000);
    ++small_calls;
  });
  EXPECT_EQ(small_calls, 1);
}

bool all_finite(const std::vector<double>& v) {
  for (double x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

// Rank 0's x and dout from the workload's seeds, and the reference's inputs over them.
ReferenceInputs seeded_inputs(const Workload& w, std::vector<float>& x, std::vector<float>& dout) {
  x.resize(size_t(w.tokens_per_rank * w.model.hidden));
  dout.resize(x.size());
  init_x(w, 0, 0, x.data());
  init_dout(w, 0, 0, dout.data());
  ReferenceInputs in;
  in.x = x.data();
  in.dout = dout.data();
  return in;
}

TEST(ReferenceWorld, OneRankWorld) {
  Workload w;
  w.model = ModelShape{16, 8, 8, 2};
  w.tokens_per_rank = 6;
  w.router.score = RouterScore::kSigmoid;
  w.router.groups = 4;
  w.router.group_topk = 2;
  w.router.expert_bias = true;
  w.router.normalize_topk = true;
  w.router.aux_coeff = 0.01;
  w.router.z_coeff = 0.001;
  const int64_t T = 6, H = 16, F = 8, E = 8, K = 2;
  Mesh mesh = make_mesh(1, 0, 1, 1, E);
  std::vector<float> x, dout;
  ReferenceInputs in = seeded_inputs(w, x, dout);
  ReferenceResult first = compute_reference(w, mesh, MPI_COMM_WORLD, in);
  ASSERT_EQ(int64_t(first.out.size()), T * H);
  ASSERT_EQ(int64_t(first.dx.size()), T * H);
  ASSERT_EQ(int64_t(first.dw_gate.size()), H * E);
  ASSERT_EQ(int64_t(first.dw_in.size()), E * H * 2 * F);
  ASSERT_EQ(int64_t(first.dw_out.size()), E * F * H);
  ASSERT_EQ(int64_t(first.idx.size()), T * K);
  for (const auto* v :
       {&first.out, &first.dx, &first.dw_gate, &first.dw_in, &first.dw_out, &first.p})
    EXPECT_TRUE(all_finite(*v));
  EXPECT_TRUE(std::isfinite(first.loss));
  EXPECT_GT(first.aux, 0);
  EXPECT_GT(first.z, 0);
  EXPECT_GT(max_abs(first.dw_in), 0);

  in.got_idx = first.idx.data();
  ReferenceResult again = compute_reference(w, mesh, MPI_COMM_WORLD, in);
  EXPECT_EQ(again.routing_mismatches, 0);
  EXPECT_EQ(again.routing_near_ties, 0);
  EXPECT_EQ(again.idx, first.idx);
  EXPECT_EQ(again.out, first.out);
  EXPECT_DOUBLE_EQ(again.loss, first.loss);

  double dot = 0;
  for (int64_t i = 0; i < T * H; ++i) dot += first.out[i] * double(dout[i]);
  EXPECT_NEAR(first.loss, dot + first.aux + first.z, 1e-12 * std::fabs(first.loss) + 1e-12);

  // A backend that routed every token to two other experts: mismatches, unless at a near tie.
  std::vector<int32_t> wrong(T * K);
  for (int64_t i = 0; i < T * K; ++i) wrong[i] = (first.idx[i] + 1) % int32_t(E);
  in.got_idx = wrong.data();
  ReferenceResult bad = compute_reference(w, mesh, MPI_COMM_WORLD, in);
  EXPECT_EQ(bad.routing_mismatches + bad.routing_near_ties, T);
  EXPECT_GT(bad.routing_mismatches, 0);
}

// A model.shared_ffn with no shared experts (an ablation of DeepSeek-V3's: --set
// model.shared_experts=0) sizes nothing: the reference staged a width of 2^31 and threw
// std::bad_alloc, where the run it checks ignores the width.
TEST(ReferenceWorld, SharedFfnWithoutSharedExpertsSizesNothing) {
  Workload w;
  w.model = ModelShape{16, 8, 4, 2};
  w.model.shared_ffn = int64_t(1) << 31;
  w.tokens_per_rank = 4;
  const int64_t T = 4, H = 16;
  Mesh mesh = make_mesh(1, 0, 1, 1, 4);
  std::vector<float> x, dout;
  const ReferenceResult r = compute_reference(w, mesh, MPI_COMM_WORLD, seeded_inputs(w, x, dout));
  EXPECT_EQ(int64_t(r.out.size()), T * H);
  EXPECT_TRUE(r.dw_sh_in.empty());
  EXPECT_TRUE(all_finite(r.out));
}

}  // namespace
}  // namespace moe
