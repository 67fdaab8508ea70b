// The reference router in float64: MATH.md steps 2-6, the aux and z losses, and their gradients.
// Plain loops over one token at a time; nothing here is shared with the backends' routers.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/reference.h"

namespace moe {
namespace {

// The relative margin under which two scores count as tied (MATH.md "Precision and tolerances").
constexpr double kNearTie = 1e-3;

bool is_near_tie(double hi, double lo) {
  return hi - lo <= kNearTie * std::max(std::fabs(hi), std::fabs(lo));
}

bool within_margin(double a, double b) {
  return std::fabs(a - b) <= kNearTie * std::max(std::fabs(a), std::fabs(b));
}

void softmax(int64_t n, const double* v, double* out) {
  double mx = v[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, v[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = std::exp(v[i] - mx);
    sum += out[i];
  }
  for (int64_t i = 0; i < n; ++i) out[i] /= sum;
}

double logsumexp(int64_t n, const double* v) {
  double mx = v[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, v[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(v[i] - mx);
  return mx + std::log(sum);
}

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

bool is_softmax(const RouterConfig& rc) { return rc.score == RouterScore::kSoftmax; }

// The aux loss's r[e] for one token: softmax of the logits, or s / sum(s) for sigmoid.
void aux_probs(const RouterConfig& rc, int64_t E, const double* logits, double* r) {
  if (is_softmax(rc)) {
    softmax(E, logits, r);
    return;
  }
  double sum = 0;
  for (int64_t e = 0; e < E; ++e) {
    r[e] = sigmoid(logits[e]);
    sum += r[e];
  }
  for (int64_t e = 0; e < E; ++e) r[e] /= sum;
}

// p before normalize and scaling: the gathered scores, or the softmax of the selected logits.
void raw_weights(const RouterConfig& rc, int64_t E, int64_t K, const double* logits,
                 const int32_t* idx, double* raw) {
  if (rc.softmax_after_topk) {
    MOE_CHECK(is_softmax(rc), "softmax_after_topk needs router.score softmax");
    std::vector<double> sel(K);
    for (int64_t k = 0; k < K; ++k) sel[k] = logits[idx[k]];
    softmax(K, sel.data(), raw);
    return;
  }
  std::vector<double> s(E);
  reference_scores(rc, E, logits, s.data());
  for (int64_t k = 0; k < K; ++k) raw[k] = s[idx[k]];
}

}  // namespace

void reference_scores(const RouterConfig& rc, int64_t E, const double* logits, double* s) {
  if (is_softmax(rc)) {
    softmax(E, logits, s);
  } else {
    for (int64_t e = 0; e < E; ++e) s[e] = sigmoid(logits[e]);
  }
}

TokenRouting reference_route_token(const RouterConfig& rc, int64_t E, int64_t K,
                                   const double* logits, const double* expert_bias) {
  const int64_t G = rc.groups, Gk = rc.group_topk;
  MOE_CHECK(K >= 1 && K <= E, "topk " << K << " must be in [1, experts " << E << "]");
  MOE_CHECK(G >= 1 && E % G == 0, "experts " << E << " not divisible by groups " << G);

  std::vector<double> s(E), q(E);
  reference_scores(rc, E, logits, s.data());
  for (int64_t e = 0; e < E; ++e)
    q[e] = s[e] + (rc.expert_bias && expert_bias ? expert_bias[e] : 0.0);

  TokenRouting r;
  std::vector<char> selectable(E, 1);
  if (G > 1) {
    const int64_t per_group = E / G;
    MOE_CHECK(Gk >= 1 && Gk <= G && K % Gk == 0 && K / Gk <= per_group,
              "group_topk " << Gk << " does not fit topk " << K << " and groups " << G);
    // A group's score: the sum of its top K/Gk q values.
    std::vector<double> group_score(G);
    for (int64_t g = 0; g < G; ++g) {
      std::vector<double> v(q.begin() + g * per_group, q.begin() + (g + 1) * per_group);
      std::sort(v.begin(), v.end(), [](double a, double b) { return a > b; });
      double sum = 0;
      for (int64_t i = 0; i < K / Gk; ++i) sum += v[i];
      group_score[g] = sum;
    }
    std::vector<int64_t> order(G);
    for (int64_t g = 0; g < G; ++g) order[g] = g;
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return group_score[a] != group_score[b] ? group_score[a] > group_score[b] : a < b;
    });
    if (Gk < G && is_near_tie(group_score[order[Gk - 1]], group_score[order[Gk]]))
      r.near_tie = true;
    std::fill(selectable.begin(), selectable.end(), 0);
    for (int64_t i = 0; i < Gk; ++i)
      for (int64_t e = order[i] * per_group; e < (order[i] + 1) * per_group; ++e) selectable[e] = 1;
  }

  // Selectable experts by descending q, ties lower expert id first.
  std::vector<int64_t> cand;
  for (int64_t e = 0; e < E; ++e)
    if (selectable[e]) cand.push_back(e);
  std::sort(cand.begin(), cand.end(),
            [&](int64_t a, int64_t b) { return q[a] != q[b] ? q[a] > q[b] : a < b; });
  if (int64_t(cand.size()) > K && is_near_tie(q[cand[K - 1]], q[cand[K]])) r.near_tie = true;

  r.idx.resize(K);
  for (int64_t k = 0; k < K; ++k) r.idx[k] = int32_t(cand[k]);
  r.p.resize(K);
  reference_topk_weights(rc, E, K, logits, r.idx.data(), r.p.data());
  return r;
}

bool reference_near_tie_swap_ok(const RouterConfig& rc, int64_t E, int64_t K, const double* logits,
                                const double* expert_bias, const TokenRouting& ref,
                                const int32_t* got) {
  std::vector<double> s(E), q(E);
  reference_scores(rc, E, logits, s.data());
  for (int64_t e = 0; e < E; ++e) q[e] = s[e] + (expert_bias ? expert_bias[e] : 0.0);
  double kth = q[ref.idx[0]];
  for (int64_t k = 1; k < K; ++k) kth = std::min(kth, q[ref.idx[k]]);
  // Group scores and the boundary group score (the lowest kept), when routing is group-limited.
  const int64_t G = rc.groups, Gk = rc.group_topk, per_group = G > 1 ? E / G : E;
  std::vector<double> group_score(G > 1 ? G : 0);
  double boundary = 0;
  if (G > 1) {
    for (int64_t g = 0; g < G; ++g) {
      std::vector<double> v(q.begin() + g * per_group, q.begin() + (g + 1) * per_group);
      std::sort(v.begin(), v.end(), [](double a, double b) { return a > b; });
      for (int64_t i = 0; i < K / Gk; ++i) group_score[g] += v[i];
    }
    std::vector<double> sorted = group_score;
    std::sort(sorted.begin(), sorted.end(), [](double a, double b) { return a > b; });
    boundary = sorted[Gk - 1];
  }
  auto at_tie = [&](int32_t e) {
    return within_margin(q[e], kth) ||
           (G > 1 && within_margin(group_score[e / per_group], boundary));
  };
  // Both sides of the flip must sit at the tie: the experts swapped in and the ones dropped.
  for (int64_t k = 0; k < K; ++k) {
    const bool swapped_in = std::find(ref.idx.begin(), ref.idx.end(), got[k]) == ref.idx.end();
    const bool dropped = std::find(got, got + K, ref.idx[k]) == got + K;
    if (swapped_in && !at_tie(got[k])) return false;
    if (dropped && !at_tie(ref.idx[k])) return false;
  }
  return true;
}

void reference_topk_weights(const RouterConfig& rc, int64_t E, int64_t K, const double* logits,
                            const int32_t* idx, double* p) {
  raw_weights(rc, E, K, logits, idx, p);
  if (rc.normalize_topk) {
    double sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += p[k];
    for (int64_t k = 0; k < K; ++k) p[k] /= sum + 1e-20;
  }
  for (int64_t k = 0; k < K; ++k) p[k] *= rc.scaling;
}

void reference_topk_weights_bwd(const RouterConfig& rc, int64_t E, int64_t K, const double* logits,
                                const int32_t* idx, const double* dp, double* dlogits) {
  std::vector<double> raw(K), g(K);
  raw_weights(rc, E, K, logits, idx, raw.data());
  // Back through scaling.
  for (int64_t k = 0; k < K; ++k) g[k] = dp[k] * rc.scaling;
  // Back through p_k = raw_k / D with D = sum(raw) + 1e-20: d/draw_k = (g_k - <g, p>) / D. In
  // this form one selected expert (K 1: p = 1, the router's gradient 0) cancels exactly, where
  // g_k / D - <g, raw> / D^2 left a rounding's worth of noise for the check to call a 100% error.
  if (rc.normalize_topk) {
    double sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += raw[k];
    const double D = sum + 1e-20;
    double dot = 0;
    for (int64_t k = 0; k < K; ++k) dot += g[k] * (raw[k] / D);
    for (int64_t k = 0; k < K; ++k) g[k] = (g[k] - dot) / D;
  }
  if (rc.softmax_after_topk) {
    // raw = softmax of the selected logits: dl_k = raw_k * (g_k - <g, raw>).
    double dot = 0;
    for (int64_t k = 0; k < K; ++k) dot += g[k] * raw[k];
    for (int64_t k = 0; k < K; ++k) dlogits[idx[k]] += raw[k] * (g[k] - dot);
    return;
  }
  // raw = s[idx]: scatter into ds, then back through the score function.
  std::vector<double> s(E), ds(E, 0.0);
  reference_scores(rc, E, logits, s.data());
  for (int64_t k = 0; k < K; ++k) ds[idx[k]] += g[k];
  if (is_softmax(rc)) {
    double dot = 0;
    for (int64_t e = 0; e < E; ++e) dot += ds[e] * s[e];
    for (int64_t e = 0; e < E; ++e) dlogits[e] += s[e] * (ds[e] - dot);
  } else {
    for (int64_t e = 0; e < E; ++e) dlogits[e] += ds[e] * s[e] * (1.0 - s[e]);
  }
}

void reference_router_losses(const RouterConfig& rc, int64_t N, int64_t E, int64_t K,
                             const double* logits, const double* counts, double* aux, double* z) {
  std::vector<double> r(E), r_sum(E, 0.0);
  double lse2 = 0;
  for (int64_t t = 0; t < N; ++t) {
    aux_probs(rc, E, logits + t * E, r.data());
    for (int64_t e = 0; e < E; ++e) r_sum[e] += r[e];
    const double lse = logsumexp(E, logits + t * E);
    lse2 += lse * lse;
  }
  double cr = 0;
  for (int64_t e = 0; e < E; ++e) cr += counts[e] * r_sum[e];
  *aux = rc.aux_coeff * double(E) / (double(K) * double(N) * double(N)) * cr;
  *z = rc.z_coeff / double(N) * lse2;
}

void reference_router_losses_bwd(const RouterConfig& rc, int64_t N, int64_t E, int64_t K,
                                 const double* logits, const double* counts, double* dlogits) {
  // aux: dL/dr[e] = A_e = aux_coeff * E / (K N^2) * c_e, then back through r.
  if (rc.aux_coeff != 0) {
    std::vector<double> a(E);
    const double scale = rc.aux_coeff * double(E) / (double(K) * double(N) * double(N));
    for (int64_t e = 0; e < E; ++e) a[e] = scale * counts[e];
    if (is_softmax(rc)) {
      std::vector<double> r(E);
      softmax(E, logits, r.data());
      double dot = 0;
      for (int64_t e = 0; e < E; ++e) dot += a[e] * r[e];
      for (int64_t e = 0; e < E; ++e) dlogits[e] += r[e] * (a[e] - dot);
    } else {
      // r = s / S with S = sum(s): dL/ds_e = a_e / S - <a, s> / S^2; then s' = s (1 - s).
      std::vector<double> s(E);
      double S = 0, dot = 0;
      for (int64_t e = 0; e < E; ++e) {
        s[e] = sigmoid(logits[e]);
        S += s[e];
        dot += a[e] * s[e];
      }
      for (int64_t e = 0; e < E; ++e)
        dlogits[e] += (a[e] / S - dot / (S * S)) * s[e] * (1.0 - s[e]);
    }
  }
  // z: d/dlogits of z_coeff / N * lse^2 = z_coeff / N * 2 lse * softmax(logits).
  if (rc.z_coeff != 0) {
    std::vector<double> sm(E);
    softmax(E, logits, sm.data());
    const double lse = logsumexp(E, logits);
    for (int64_t e = 0; e < E; ++e) dlogits[e] += rc.z_coeff / double(N) * 2.0 * lse * sm[e];
  }
}

}  // namespace moe
