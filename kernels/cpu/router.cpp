// The CPU router (MATH.md steps 1-6, the aux and z losses, and their backward). Elementwise math is
// fp32, as on the GPU; sums over tokens (the loss statistics) are accumulated in double so that
// they do not drift with T. One token at a time, in plain loops: E is at most a few hundred.
#include "kernels/cpu/router.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/router_shape.h"
#include "kernels/cpu/gemm.h"

namespace moe::cpu {

namespace {

bool is_softmax(const RouterConfig& cfg) { return cfg.score == RouterScore::kSoftmax; }

void check_shapes(const RouterConfig& cfg, int64_t E, int64_t K) { check_router_shape(cfg, E, K); }

// out[0..k) = the k largest v[j] with allowed[j] (nullptr: all), largest first, ties lower j first.
// Repeated linear scans: O(k n), deterministic, and k, n are small.
void top_k(const float* v, const uint8_t* allowed, int64_t n, int64_t k, int32_t* out,
           std::vector<uint8_t>& taken) {
  taken.assign(n, 0);
  for (int64_t i = 0; i < k; i++) {
    int64_t best = -1;
    for (int64_t j = 0; j < n; j++) {
      if (taken[j] || (allowed && !allowed[j])) continue;
      // Strict '>' while scanning up keeps the lower id on ties.
      if (best < 0 || v[j] > v[best]) best = j;
    }
    MOE_CHECK(best >= 0, "top_k: fewer than " << k << " selectable entries");
    taken[best] = 1;
    out[i] = int32_t(best);
  }
}

// Softmax of n logits in place into out (max subtracted); returns logsumexp.
float softmax(const float* l, int64_t n, float* out) {
  float m = l[0];
  for (int64_t j = 1; j < n; j++) m = std::max(m, l[j]);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; j++) {
    out[j] = std::exp(l[j] - m);
    sum += out[j];
  }
  for (int64_t j = 0; j < n; j++) out[j] /= sum;
  return m + std::log(sum);
}

float logsumexp(const float* l, int64_t n) {
  float m = l[0];
  for (int64_t j = 1; j < n; j++) m = std::max(m, l[j]);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; j++) sum += std::exp(l[j] - m);
  return m + std::log(sum);
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void router_logits(const float* x, const float* w_gate, int64_t T, int64_t H, int64_t E,
                   float* logits) {
  gemm(false, false, T, E, H, x, w_gate, logits, false, DType::kFp32);
}

void router_topk(const float* logits, const float* expert_bias, const int32_t* forced_idx,
                 const RouterConfig& cfg, int64_t T, int64_t E, int64_t K, float* scores,
                 int32_t* idx, float* p) {
  check_shapes(cfg, E, K);
  bool softmax_scores = is_softmax(cfg);
  int64_t G = cfg.groups > 1 ? cfg.groups : 1;
  int64_t group_size = E / G;
  int64_t per_group = K / (G > 1 ? cfg.group_topk : 1);  // values summed into a group's score
  float scaling = float(cfg.scaling);

  std::vector<float> q(E), group_score(G), sel_logits(K);
  std::vector<uint8_t> allowed(E), taken;
  std::vector<int32_t> pick(std::max(K, G));
  for (int64_t t = 0; t < T; t++) {
    const float* l = logits + t * E;
    float* s = scores + t * E;
    int32_t* it = idx + t * K;
    float* pt = p + t * K;

    if (softmax_scores) {
      softmax(l, E, s);
    } else {
      for (int64_t e = 0; e < E; e++) s[e] = sigmoid(l[e]);
    }
    for (int64_t e = 0; e < E; e++) q[e] = expert_bias ? s[e] + expert_bias[e] : s[e];

    // Group-limited routing: score each group by the sum of its per_group best q, keep the
    // group_topk best groups (ties: lower group id), and allow only their experts.
    if (forced_idx) {
      std::copy(forced_idx + t * K, forced_idx + (t + 1) * K, it);
    } else if (G > 1) {
      for (int64_t g = 0; g < G; g++) {
        const float* qg = q.data() + g * group_size;
        top_k(qg, nullptr, group_size, per_group, pick.data(), taken);
        float sum = 0.0f;
        for (int64_t i = 0; i < per_group; i++) sum += qg[pick[i]];
        group_score[g] = sum;
      }
      top_k(group_score.data(), nullptr, G, cfg.group_topk, pick.data(), taken);
      allowed.assign(E, 0);
      for (int64_t i = 0; i < cfg.group_topk; i++) {
        for (int64_t e = 0; e < group_size; e++) allowed[pick[i] * group_size + e] = 1;
      }
      top_k(q.data(), allowed.data(), E, K, it, taken);
    } else {
      top_k(q.data(), nullptr, E, K, it, taken);
    }

    if (cfg.softmax_after_topk) {
      for (int64_t k = 0; k < K; k++) sel_logits[k] = l[it[k]];
      softmax(sel_logits.data(), K, pt);
    } else {
      for (int64_t k = 0; k < K; k++) pt[k] = s[it[k]];
    }
    if (cfg.normalize_topk) {
      float sum = 0.0f;
      for (int64_t k = 0; k < K; k++) sum += pt[k];
      for (int64_t k = 0; k < K; k++) pt[k] /= (sum + 1e-20f);
    }
    for (int64_t k = 0; k < K; k++) pt[k] *= scaling;
  }
}

void router_loss_stats(const float* logits, const float* scores, const int32_t* idx,
                       const RouterConfig& cfg, int64_t T, int64_t E, int64_t K, float* stats) {
  bool softmax_scores = is_softmax(cfg);
  std::vector<double> counts(E, 0.0), r_sum(E, 0.0);
  double lse_sq = 0.0;
  for (int64_t t = 0; t < T; t++) {
    const float* l = logits + t * E;
    const float* s = scores + t * E;
    for (int64_t k = 0; k < K; k++) counts[idx[t * K + k]] += 1.0;
    // r = softmax(logits) = s for softmax scores; s / sum_e s for sigmoid.
    float inv = 1.0f;
    if (!softmax_scores) {
      float sum = 0.0f;
      for (int64_t e = 0; e < E; e++) sum += s[e];
      inv = 1.0f / sum;
    }
    for (int64_t e = 0; e < E; e++) r_sum[e] += double(s[e] * inv);
    float lse = logsumexp(l, E);
    lse_sq += double(lse) * double(lse);
  }
  for (int64_t e = 0; e < E; e++) {
    stats[e] = float(counts[e]);
    stats[E + e] = float(r_sum[e]);
  }
  stats[2 * E] = float(lse_sq);
}

void router_bwd(const float* logits, const float* scores, const int32_t* idx, const float* dp,
                const float* global_counts, const RouterConfig& cfg, int64_t N, int64_t T,
                int64_t E, int64_t K, float* dlogits) {
  check_shapes(cfg, E, K);
  bool softmax_scores = is_softmax(cfg);
  float scaling = float(cfg.scaling);
  float aux_coef = float(cfg.aux_coeff * double(E) / (double(K) * double(N) * double(N)));
  float z_coef = float(cfg.z_coeff / double(N));

  std::vector<float> p_raw(K), dp_raw(K), sel_logits(K), ds(E), sm(E);
  for (int64_t t = 0; t < T; t++) {
    const float* l = logits + t * E;
    const float* s = scores + t * E;
    const int32_t* it = idx + t * K;
    const float* dpt = dp + t * K;
    float* dl = dlogits + t * E;
    for (int64_t e = 0; e < E; e++) dl[e] = 0.0f;

    // p_raw: the gathered scores, or the softmax over the selected logits.
    if (cfg.softmax_after_topk) {
      for (int64_t k = 0; k < K; k++) sel_logits[k] = l[it[k]];
      softmax(sel_logits.data(), K, p_raw.data());
    } else {
      for (int64_t k = 0; k < K; k++) p_raw[k] = s[it[k]];
    }

    // Through scaling: p = scaling * p_n, so dL/dp_n = scaling * dp. Through normalize:
    // p_n = p_raw / (S + eps), S = sum p_raw, so dL/dp_raw_j = (g_j - sum_k g_k p_n_k) / (S + eps).
    for (int64_t k = 0; k < K; k++) dp_raw[k] = scaling * dpt[k];
    if (cfg.normalize_topk) {
      float sum = 0.0f;
      for (int64_t k = 0; k < K; k++) sum += p_raw[k];
      float denom = sum + 1e-20f;
      float g_dot_pn = 0.0f;
      for (int64_t k = 0; k < K; k++) g_dot_pn += dp_raw[k] * (p_raw[k] / denom);
      for (int64_t k = 0; k < K; k++) dp_raw[k] = (dp_raw[k] - g_dot_pn) / denom;
    }

    if (cfg.softmax_after_topk) {
      // Softmax over the selected logits: dl_sel_k = p_k (dp_k - sum_m dp_m p_m).
      float dot = 0.0f;
      for (int64_t k = 0; k < K; k++) dot += dp_raw[k] * p_raw[k];
      for (int64_t k = 0; k < K; k++) dl[it[k]] += p_raw[k] * (dp_raw[k] - dot);
    } else {
      // Gather p_raw = s[idx]: ds is nonzero only at the selected experts (idx has no repeats).
      for (int64_t e = 0; e < E; e++) ds[e] = 0.0f;
      for (int64_t k = 0; k < K; k++) ds[it[k]] += dp_raw[k];
      if (softmax_scores) {
        float dot = 0.0f;
        for (int64_t k = 0; k < K; k++) dot += ds[it[k]] * s[it[k]];
        for (int64_t e = 0; e < E; e++) dl[e] += s[e] * (ds[e] - dot);
      } else {
        for (int64_t k = 0; k < K; k++) {
          int32_t e = it[k];
          dl[e] += s[e] * (1.0f - s[e]) * ds[e];
        }
      }
    }

    // aux = aux_coef * sum_e c_e r_e (summed over tokens), c constant.
    if (cfg.aux_coeff != 0.0) {
      if (softmax_scores) {
        // r = s = softmax(l): dl_j = aux_coef * s_j (c_j - <c, s>).
        float cs = 0.0f;
        for (int64_t e = 0; e < E; e++) cs += global_counts[e] * s[e];
        for (int64_t e = 0; e < E; e++) dl[e] += aux_coef * s[e] * (global_counts[e] - cs);
      } else {
        // r = s / S: dL/ds_j = aux_coef / S (c_j - <c, r>), then sigmoid' = s (1 - s).
        float sum = 0.0f;
        for (int64_t e = 0; e < E; e++) sum += s[e];
        float cr = 0.0f;
        for (int64_t e = 0; e < E; e++) cr += global_counts[e] * (s[e] / sum);
        for (int64_t e = 0; e < E; e++) {
          dl[e] += aux_coef / sum * (global_counts[e] - cr) * s[e] * (1.0f - s[e]);
        }
      }
    }

    // z = z_coef * lse^2: dl_j = z_coef * 2 lse softmax(l)_j (softmax of the logits even when the
    // scores are sigmoids).
    if (cfg.z_coeff != 0.0) {
      float lse = softmax(l, E, sm.data());
      for (int64_t e = 0; e < E; e++) dl[e] += z_coef * 2.0f * lse * sm[e];
    }
  }
}

void router_input_grads(const float* x, const float* w_gate, const float* dlogits, int64_t T,
                        int64_t H, int64_t E, float* dx_acc, float* dw_gate) {
  gemm(false, true, T, H, E, dlogits, w_gate, dx_acc, true, DType::kFp32);
  gemm(true, false, H, E, T, x, dlogits, dw_gate, false, DType::kFp32);
}

}  // namespace moe::cpu
