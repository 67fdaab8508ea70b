// The reference step in float64: plain loops over MATH.md, (token, expert) pair by pair. It
// shares no code with the backends (no permutation, all-to-all or grouped GEMM): all it takes from
// them is this rank's x, dout and routing, and the weights it regenerates from the seed.
#include "core/reference.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/init.h"
#include "core/parallel.h"
#include "core/routing_modes.h"

namespace moe {
namespace {

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// d silu(v) / dv = sig(v) * (1 + v * (1 - sig(v))).
double silu_grad(double v) {
  const double sig = 1.0 / (1.0 + std::exp(-v));
  return sig * (1.0 + v * (1.0 - sig));
}

// logits[e] = sum_h x[h] * w_gate[h, e] for one token.
void token_logits(const double* x, const double* w_gate, int64_t H, int64_t E, double* logits) {
  for (int64_t e = 0; e < E; ++e) logits[e] = 0;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t e = 0; e < E; ++e) logits[e] += x[h] * w_gate[h * E + e];
}

std::vector<double> all_logits(const ReferenceProblem& prob) {
  const int64_t N = prob.tokens, H = prob.model.hidden, E = prob.model.experts;
  std::vector<double> logits(N * E);
  for (int64_t t = 0; t < N; ++t)
    token_logits(&prob.x[t * H], prob.w_gate.data(), H, E, &logits[t * E]);
  return logits;
}

// c_e: how many (t, k) over the given routing go to expert e.
std::vector<double> expert_counts(const int32_t* idx, int64_t N, int64_t E, int64_t K) {
  std::vector<double> counts(E, 0.0);
  for (int64_t i = 0; i < N * K; ++i) counts[idx[i]] += 1.0;
  return counts;
}

// Up to this many (token, k) pairs of one expert go through the loops together, so that each weight
// row is read from memory once per block instead of once per pair (an expert's weights do not fit
// in cache at real sizes); the arithmetic is still pair by pair.
constexpr int64_t kBlock = 64;

// One (token, k) pair routed to the expert at hand. Null outputs are not computed.
struct Pair {
  const double* x;     // [H]
  const double* dout;  // [H]
  double p;
  double* out;  // [H] += p * y             (own tokens)
  double* dp;   // = <y, dout>              (own tokens)
  double* dx;   // [H] += dh @ w_in^T       (own tokens, backward)
};

struct BlockScratch {
  std::vector<double> h, a, y, dy, da, dh;  // [kBlock, 2F], [kBlock, F], [kBlock, H], ...
  BlockScratch(int64_t H, int64_t F)
      : h(kBlock * 2 * F),
        a(kBlock * F),
        y(kBlock * H),
        dy(kBlock * H),
        da(kBlock * F),
        dh(kBlock * 2 * F) {}
};

// MATH.md step 7 and its backward for n <= kBlock pairs of one expert, whose w_in is [H, 2F] and
// w_out [F, H]. With `backward`, also dw_in += x^T dh and dw_out += a^T dy over the pairs (this
// expert's gradients; null when it is not a local expert).
void expert_block(int64_t H, int64_t F, const Pair* pairs, int64_t n, const double* w_in,
                  const double* w_out, bool backward, double* dw_in, double* dw_out,
                  BlockScratch& s) {
  const int64_t F2 = 2 * F;
  // Each loop below splits its output over threads (for_each_range): the sums' order is the
  // one-thread loop's.
  // h = x @ w_in;  a = silu(g) * u with g = h[:F], u = h[F:].
  std::fill(s.h.begin(), s.h.begin() + n * F2, 0.0);
  for_each_range(F2, n * H, [&](int64_t j0, int64_t j1) {
    for (int64_t i = 0; i < H; ++i)
      for (int64_t b = 0; b < n; ++b) {
        const double xi = pairs[b].x[i];
        for (int64_t j = j0; j < j1; ++j) s.h[b * F2 + j] += xi * w_in[i * F2 + j];
      }
  });
  for (int64_t b = 0; b < n; ++b)
    for (int64_t f = 0; f < F; ++f) s.a[b * F + f] = silu(s.h[b * F2 + f]) * s.h[b * F2 + F + f];

  // y = a @ w_out, only where a token's out or dp is wanted; out += p * y;  dp = <y, dout>.
  std::fill(s.y.begin(), s.y.begin() + n * H, 0.0);
  for_each_range(H, n * F, [&](int64_t o0, int64_t o1) {
    for (int64_t f = 0; f < F; ++f)
      for (int64_t b = 0; b < n; ++b) {
        if (!pairs[b].out && !pairs[b].dp) continue;
        const double af = s.a[b * F + f];
        for (int64_t o = o0; o < o1; ++o) s.y[b * H + o] += af * w_out[f * H + o];
      }
  });
  for (int64_t b = 0; b < n; ++b) {
    const Pair& pr = pairs[b];
    if (pr.out)
      for (int64_t o = 0; o < H; ++o) pr.out[o] += pr.p * s.y[b * H + o];
    if (pr.dp) {
      double dot = 0;
      for (int64_t o = 0; o < H; ++o) dot += s.y[b * H + o] * pr.dout[o];
      *pr.dp = dot;
    }
  }
  if (!backward) return;

  // dy = p * dout;  da = dy @ w_out^T;  dw_out += a^T dy.
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < H; ++o) s.dy[b * H + o] = pairs[b].p * pairs[b].dout[o];
  for_each_range(F, n * H, [&](int64_t f0, int64_t f1) {
    for (int64_t f = f0; f < f1; ++f)
      for (int64_t b = 0; b < n; ++b) {
        double dot = 0;
        for (int64_t o = 0; o < H; ++o) dot += s.dy[b * H + o] * w_out[f * H + o];
        s.da[b * F + f] = dot;
      }
  });
  if (dw_out)
    for_each_range(F, n * H, [&](int64_t f0, int64_t f1) {
      for (int64_t f = f0; f < f1; ++f)
        for (int64_t b = 0; b < n; ++b) {
          const double af = s.a[b * F + f];
          for (int64_t o = 0; o < H; ++o) dw_out[f * H + o] += af * s.dy[b * H + o];
        }
    });

  // dg = da * u * silu'(g);  du = da * silu(g).
  for (int64_t b = 0; b < n; ++b)
    for (int64_t f = 0; f < F; ++f) {
      const double g = s.h[b * F2 + f], u = s.h[b * F2 + F + f], da = s.da[b * F + f];
      s.dh[b * F2 + f] = da * u * silu_grad(g);
      s.dh[b * F2 + F + f] = da * silu(g);
    }
  // dx += dh @ w_in^T (own tokens);  dw_in += x^T dh.
  for_each_range(H, n * F2, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t b = 0; b < n; ++b) {
        if (!pairs[b].dx) continue;
        double dot = 0;
        for (int64_t j = 0; j < F2; ++j) dot += s.dh[b * F2 + j] * w_in[i * F2 + j];
        pairs[b].dx[i] += dot;
      }
  });
  if (dw_in)
    for_each_range(H, n * F2, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t b = 0; b < n; ++b) {
          const double xi = pairs[b].x[i];
          for (int64_t j = 0; j < F2; ++j) dw_in[i * F2 + j] += xi * s.dh[b * F2 + j];
        }
    });
}

// ---- FP8 expert GEMMs (MATH.md "FP8 expert GEMMs") ----

// A row block of float64 values through FP8: rounded to float (the values are bf16 already, or
// are rounded to it first), quantized by `quantize` in place, and back.
std::vector<double> quantized(std::vector<float> v, const std::function<void(float*)>& quantize) {
  quantize(v.data());
  std::vector<double> out;
  convert_into(v.data(), int64_t(v.size()), out);
  return out;
}

double to_bf16(double v) { return round_to_bf16(float(v)); }

// C [n, N] = A [n, K] @ B, B [K, N] or, transposed, [N, K].
std::vector<double> matmul(const std::vector<double>& A, const std::vector<double>& B, int64_t n,
                           int64_t K, int64_t N, bool trans_b) {
  std::vector<double> C(n * N, 0.0);
  for_each_range(N, n * K, [&](int64_t j0, int64_t j1) {
    for (int64_t r = 0; r < n; ++r)
      for (int64_t k = 0; k < K; ++k) {
        const double a = A[r * K + k];
        if (a == 0) continue;
        for (int64_t j = j0; j < j1; ++j)
          C[r * N + j] += a * (trans_b ? B[j * K + k] : B[k * N + j]);
      }
  });
  return C;
}

// C [M, N] += A [n, M]^T @ B [n, N].
void add_rows_t_times_rows(const std::vector<double>& A, const std::vector<double>& B, int64_t n,
                           int64_t M, int64_t N, double* C) {
  for_each_range(M, n * N, [&](int64_t i0, int64_t i1) {
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = i0; i < i1; ++i) {
        const double a = A[r * M + i];
        if (a == 0) continue;
        for (int64_t j = 0; j < N; ++j) C[i * N + j] += a * B[r * N + j];
      }
  });
}

// One expert's weights [rows, cols] as its FP8 GEMMs see them (128 x 128 blocks or one scale;
// the data gradients multiply the transpose, whose blocks are the same).
// Into out, through the float scratch: both kept by the caller across experts, since fresh
// buffers of a model's weights (hundreds of MB an expert) cost more in page faults than the
// quantization itself.
void quantize_weight_into(const double* w, int64_t rows, int64_t cols, Fp8Recipe recipe,
                          std::vector<float>& scratch, std::vector<double>& out) {
  convert_into(w, rows * cols, scratch);
  fp8_quantize_weight(scratch.data(), rows, cols, recipe);
  convert_into(scratch.data(), rows * cols, out);
}

// fp8_tensor: one operand's scales as the backend reported them (0: none) and where the
// adoptions are marked (null: uncounted), core/fp8_scales.h.
struct ScaleTies {
  float got[kNumFp8Computed] = {};
  uint8_t* adopted[kNumFp8Computed] = {};
  float* rel_diff[kNumFp8Computed] = {};
  // The operand `kind` [count] through FP8 as one tensor (quantized): with the reference's own
  // scale, or the backend's where the two are a near tie.
  std::vector<double> quantized(Fp8Computed kind, std::vector<float> X) const {
    const int64_t count = int64_t(X.size());
    return moe::quantized(std::move(X), [&](float* q) {
      float scale = fp8_tensor_scale(q, count);
      const int k = int(kind);
      if (got[k] != scale && fp8_scale_near_tie(scale, got[k])) {
        if (adopted[k]) {
          *adopted[k] = 1;
          *rel_diff[k] = std::max(*rel_diff[k], float(std::fabs(double(got[k]) / scale - 1.0)));
        }
        scale = got[k];
      }
      fp8_quantize_tensor(q, count, scale);
    });
  }
};

// One expert's rows of the weight gradients' operands, as the backends store them (bf16 values),
// a row per pair: x as w_in's gradient takes it [n, H], a [n, F], dy [n, H], dh [n, 2F].
struct WgradRows {
  int64_t H, F;
  std::vector<float> x, a, dy, dh;
  WgradRows(int64_t H_, int64_t F_, size_t n)
      : H(H_), F(F_), x(n * H_), a(n * F_), dy(n * H_), dh(n * 2 * F_) {}
};

// MATH.md step 7 and the data gradients for the pairs `at` of one expert's FP8 operand (one
// GEMM's rows: every operand is quantized as a whole, so no row is computed apart from the
// others), in the order the backends' expert-major rows take; their weight-gradient operands go
// to `wg` at the same pairs. The operands a, dy and dh are rounded to bf16, as the backends store
// them, before they are quantized, and so are h and da, which the backends store before SwiGLU
// and its backward read them (docs/layer.md says why it matters). arith holds the expert's
// quantized weights. Outputs as in expert_block.
// x_dispatched_fp8 (dispatch_dtype fp8, routed experts): x reached the experts as its 1 x 128
// quantization only, which the up projection takes (the same as its own quantization of x) and
// w_in's gradient takes rounded to bf16 (docs/layer.md, FP8 dispatch).
void expert_operand_fp8(int64_t H, int64_t F, const std::vector<Pair>& all,
                        const std::vector<size_t>& at, Fp8Recipe recipe, bool x_dispatched_fp8,
                        bool backward, const Fp8Arithmetic& arith, const ScaleTies* ties,
                        WgradRows& wg) {
  const auto& matmul = arith.matmul;
  const int64_t n = int64_t(at.size());
  std::vector<Pair> pairs;
  for (size_t i : at) pairs.push_back(all[i]);
  const int64_t F2 = 2 * F;
  auto along_rows = [&](const std::vector<float>& v, int64_t cols) {
    return quantized(v, [&](float* q) { fp8_quantize_along_rows(q, n, cols, recipe); });
  };
  // The operands the step computes, per tensor with the backend's scale at a near tie.
  auto computed_along_rows = [&](const std::vector<float>& v, int64_t cols, Fp8Computed kind) {
    return ties ? ties->quantized(kind, v) : along_rows(v, cols);
  };
  std::vector<float> x(n * H), a(n * F);
  for_each_row(n, H, [&](int64_t b) { std::copy(pairs[b].x, pairs[b].x + H, &x[b * H]); });
  const std::vector<double> xq = along_rows(x, H);
  std::vector<double> h = matmul(xq, ExpertWeight::kIn, n, H, F2, false);
  for_each_row(n, F2, [&](int64_t b) {
    double* hb = &h[b * F2];
    for (int64_t j = 0; j < F2; ++j) hb[j] = to_bf16(hb[j]);
    for (int64_t f = 0; f < F; ++f) a[b * F + f] = float(to_bf16(silu(hb[f]) * hb[F + f]));
  });
  const std::vector<double> y =
      matmul(computed_along_rows(a, F, Fp8Computed::kA), ExpertWeight::kOut, n, F, H, false);
  // A token meets an expert once: each row's out and dp are its own.
  for_each_row(n, 2 * H, [&](int64_t b) {
    const Pair& pr = pairs[b];
    const double* yb = &y[b * H];
    if (pr.out)
      for (int64_t o = 0; o < H; ++o) pr.out[o] += pr.p * yb[o];
    if (pr.dp) {
      double dot = 0;
      for (int64_t o = 0; o < H; ++o) dot += yb[o] * pr.dout[o];
      *pr.dp = dot;
    }
  });
  if (!backward) return;

  std::vector<float> dy(n * H), dh(n * F2);
  for_each_row(n, H, [&](int64_t b) {
    for (int64_t o = 0; o < H; ++o) dy[b * H + o] = float(to_bf16(pairs[b].p * pairs[b].dout[o]));
  });
  std::vector<double> da =
      matmul(computed_along_rows(dy, H, Fp8Computed::kDy), ExpertWeight::kOut, n, H, F, true);
  for_each_row(n, F2, [&](int64_t b) {
    for (int64_t f = 0; f < F; ++f) {
      const double g = h[b * F2 + f], u = h[b * F2 + F + f], d = to_bf16(da[b * F + f]);
      dh[b * F2 + f] = float(to_bf16(d * u * silu_grad(g)));
      dh[b * F2 + F + f] = float(to_bf16(d * silu(g)));
    }
  });
  const std::vector<double> dx =
      matmul(computed_along_rows(dh, F2, Fp8Computed::kDh), ExpertWeight::kIn, n, F2, H, true);
  for_each_row(n, 2 * H + 2 * F + F2, [&](int64_t b) {
    if (pairs[b].dx)
      for (int64_t i = 0; i < H; ++i) pairs[b].dx[i] += dx[b * H + i];
    if (x_dispatched_fp8)
      for (int64_t i = b * H; i < (b + 1) * H; ++i) x[i] = float(to_bf16(xq[i]));
    const size_t r = at[b];
    std::copy(&x[b * H], &x[(b + 1) * H], &wg.x[r * H]);
    std::copy(&a[b * F], &a[(b + 1) * F], &wg.a[r * F]);
    std::copy(&dy[b * H], &dy[(b + 1) * H], &wg.dy[r * H]);
    std::copy(&dh[b * F2], &dh[(b + 1) * F2], &wg.dh[r * F2]);
  });
}

// The weight gradients of one FP8 operand, the pairs `at` of wg: they reduce over the rows, so
// their operands are quantized in 128 x 1 blocks down them.
void weight_gradients_fp8(const WgradRows& wg, const std::vector<size_t>& at, Fp8Recipe recipe,
                          const Fp8Arithmetic& arith, const ScaleTies* ties, double* dw_in,
                          double* dw_out) {
  const auto& add_rows_t_times_rows = arith.add_t_times;
  const int64_t n = int64_t(at.size()), H = wg.H, F = wg.F, F2 = 2 * F;
  auto gather = [&](const std::vector<float>& v, int64_t cols) {
    std::vector<float> out(n * cols);
    for_each_row(n, cols, [&](int64_t b) {
      std::copy(&v[at[b] * cols], &v[(at[b] + 1) * cols], &out[b * cols]);
    });
    return out;
  };
  auto rows = [&](const std::vector<float>& v, int64_t cols) {
    return quantized(gather(v, cols),
                     [&](float* q) { fp8_quantize_down_columns(q, n, cols, recipe); });
  };
  // The operands the step computes, per tensor with the backend's scale at a near tie.
  auto computed_rows = [&](const std::vector<float>& v, int64_t cols, Fp8Computed kind) {
    return ties ? ties->quantized(kind, gather(v, cols)) : rows(v, cols);
  };
  if (dw_out)
    add_rows_t_times_rows(computed_rows(wg.a, F, Fp8Computed::kA),
                          computed_rows(wg.dy, H, Fp8Computed::kDy), n, F, H, dw_out);
  if (dw_in)
    add_rows_t_times_rows(rows(wg.x, H), computed_rows(wg.dh, F2, Fp8Computed::kDh), n, H, F2,
                          dw_in);
}

// The pairs (in token order) of each distinct id in ids, each list in that order.
std::vector<std::vector<size_t>> pairs_by_id(const std::vector<int32_t>& ids) {
  std::vector<int32_t> distinct = ids;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::vector<std::vector<size_t>> out;
  for (int32_t id : distinct) {
    std::vector<size_t>& at = out.emplace_back();
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] == id) at.push_back(i);
  }
  return out;
}

// Splits one expert's pairs (in token order) into its FP8 operands by operand[t] (empty: one
// operand), each kept in token order, and runs each whole; then its weight gradients over the
// operands of wgrad_operand[t] (empty: operand's), which may be wider (a pipelined step's take
// every chunk's rows in one GEMM). The expert is routed expert e, or with `shared` shared expert e.
void experts_fp8_by_operand(const ReferenceProblem& prob, const std::vector<Pair>& pairs,
                            const std::vector<int64_t>& tokens, const std::vector<int32_t>& operand,
                            const std::vector<int32_t>& wgrad_operand, bool shared, int64_t e,
                            int64_t F, bool x_dispatched_fp8, bool backward,
                            const Fp8Arithmetic& arith, double* dw_in, double* dw_out) {
  const int64_t H = prob.model.hidden;
  const Fp8Recipe recipe = fp8_recipe_of(prob.precision);
  arith.quantize_weights(shared, e, recipe);
  std::vector<int32_t> ids, wgrad_ids;
  for (int64_t t : tokens) {
    ids.push_back(operand.empty() ? 0 : operand[t]);
    wgrad_ids.push_back(wgrad_operand.empty() ? ids.back() : wgrad_operand[t]);
  }
  // The backend's scales of the routed expert's operands (none reported: all 0, none adopted);
  // per-tensor scales are fp8_tensor's alone.
  const bool tied = !shared && !prob.got_scales.empty();
  MOE_CHECK(!tied || recipe == Fp8Recipe::kTensor, "the backend's FP8 scales come with fp8_tensor");
  auto ties_of = [&](int32_t id) {
    ScaleTies t;
    for (int k = 0; k < kNumFp8Computed; ++k) {
      t.got[k] = prob.got_scales.at(id, Fp8Computed(k), e);
      if (!prob.adoptions) continue;
      const size_t at = size_t((id * kNumFp8Computed + k) * prob.got_scales.experts + e);
      t.adopted[k] = &prob.adoptions->adopted[at];
      t.rel_diff[k] = &prob.adoptions->rel_diff[at];
    }
    return t;
  };
  WgradRows wg(H, F, pairs.size());
  for (const std::vector<size_t>& at : pairs_by_id(ids)) {
    const ScaleTies ties = tied ? ties_of(ids[at.front()]) : ScaleTies{};
    expert_operand_fp8(H, F, pairs, at, recipe, x_dispatched_fp8, backward, arith,
                       tied ? &ties : nullptr, wg);
  }
  if (!backward || (!dw_in && !dw_out)) return;
  for (const std::vector<size_t>& at : pairs_by_id(wgrad_ids)) {
    // A pipelined step's weight gradients take every chunk's rows: the backend's scale of that
    // operand is the largest of its chunks' (an amax is a max), its adoption left uncounted.
    ScaleTies ties;
    if (tied)
      for (size_t i : at)
        for (int k = 0; k < kNumFp8Computed; ++k)
          ties.got[k] = std::max(ties.got[k], prob.got_scales.at(ids[i], Fp8Computed(k), e));
    weight_gradients_fp8(wg, at, recipe, arith, tied ? &ties : nullptr, dw_in, dw_out);
  }
}

// The CPU math's FP8 arithmetic: the float64 loops over prob's weights.
Fp8Arithmetic float64_arithmetic(const ReferenceProblem& prob) {
  // One expert's quantized weights, kept across experts (quantize_weight_into).
  struct Quantized {
    std::vector<float> scratch;
    std::vector<double> w_in, w_out;
  };
  auto q = std::make_shared<Quantized>();
  Fp8Arithmetic a;
  a.quantize_weights = [&prob, q](bool shared, int64_t e, Fp8Recipe recipe) {
    const int64_t H = prob.model.hidden, F = shared ? prob.model.shared_ffn : prob.model.ffn;
    const std::vector<double>& in = shared ? prob.w_sh_in : prob.w_in;
    const std::vector<double>& out = shared ? prob.w_sh_out : prob.w_out;
    quantize_weight_into(&in[e * H * 2 * F], H, 2 * F, recipe, q->scratch, q->w_in);
    quantize_weight_into(&out[e * F * H], F, H, recipe, q->scratch, q->w_out);
  };
  a.matmul = [q](const std::vector<double>& A, ExpertWeight w, int64_t n, int64_t K, int64_t N,
                 bool trans) {
    return matmul(A, w == ExpertWeight::kIn ? q->w_in : q->w_out, n, K, N, trans);
  };
  a.add_t_times = add_rows_t_times_rows;
  return a;
}

// The expert FFNs of the routing idx / p [N, K], expert by expert (see ExpertsPass). With FP8,
// every row of an operand that holds an own token's row or feeds a local expert's gradient takes
// part: the operand's scales depend on all of its rows; arith gives its weights and products
// (null: the float64 loops over prob's weights).
void run_experts(const ReferenceProblem& prob, const int32_t* idx, const uint8_t* dropped,
                 const double* p, const ExpertsPass& ps, const Fp8Arithmetic* arith = nullptr) {
  const int64_t N = prob.tokens, H = prob.model.hidden, F = prob.model.ffn;
  const int64_t E = prob.model.experts, K = prob.model.topk;
  const bool fp8 = prob.precision != Precision::kBf16;
  BlockScratch scratch(H, F);
  std::vector<Pair> pairs;
  std::vector<int64_t> tokens;            // each pair's token
  std::vector<double> sink_in, sink_out;  // one expert's gradients for ps.expert_grads
  const Fp8Arithmetic own_arith = fp8 && !arith ? float64_arithmetic(prob) : Fp8Arithmetic{};
  if (fp8 && !arith) arith = &own_arith;
  // FP8: the operands that hold an own token's rows.
  std::vector<uint8_t> wanted;
  if (fp8)
    for (int64_t t = ps.token_begin; t < ps.token_end; ++t) {
      const size_t id = prob.gemm_operand.empty() ? 0 : size_t(prob.gemm_operand[t]);
      if (wanted.size() <= id) wanted.resize(id + 1, 0);
      wanted[id] = 1;
    }
  for (int64_t e = 0; e < E; ++e) {
    const bool local = ps.local(e) >= 0;
    if (ps.local_only && !local) continue;
    pairs.clear();
    tokens.clear();
    for (int64_t t = 0; t < N; ++t) {
      const bool own = t >= ps.token_begin && t < ps.token_end;
      const size_t id = fp8 && !prob.gemm_operand.empty() ? size_t(prob.gemm_operand[t]) : 0;
      if (!own && !local && !(id < wanted.size() && wanted[id])) continue;
      for (int64_t k = 0; k < K; ++k) {
        if (idx[t * K + k] != e || (dropped && dropped[t * K + k])) continue;
        const int64_t r = t - ps.token_begin;
        Pair pr{&prob.x[t * H], &prob.dout[t * H], p[t * K + k], nullptr, nullptr, nullptr};
        if (own) {
          pr.out = ps.out + r * H;
          pr.dp = ps.dp ? ps.dp + r * K + k : nullptr;
          pr.dx = ps.backward ? ps.dx + r * H : nullptr;
        }
        pairs.push_back(pr);
        tokens.push_back(t);
      }
    }
    double *dw_in = nullptr, *dw_out = nullptr;
    if (local && ps.backward && ps.expert_grads) {
      sink_in.resize(H * 2 * F);
      sink_out.resize(F * H);
      dw_in = sink_in.data();
      dw_out = sink_out.data();
      for_each_element(H * 2 * F, [&](int64_t i) { dw_in[i] = 0; });
      for_each_element(F * H, [&](int64_t i) { dw_out[i] = 0; });
    } else if (local && ps.backward) {
      dw_in = ps.dw_in + ps.local(e) * H * 2 * F;
      dw_out = ps.dw_out + ps.local(e) * F * H;
    }
    if (fp8 && !pairs.empty()) {
      experts_fp8_by_operand(prob, pairs, tokens, prob.gemm_operand, prob.wgrad_operand, false, e,
                             F, prob.dispatch_fp8, ps.backward, *arith, dw_in, dw_out);
    } else if (!fp8) {
      const double* w_in = &prob.w_in[e * H * 2 * F];
      const double* w_out = &prob.w_out[e * F * H];
      for (int64_t b0 = 0; b0 < int64_t(pairs.size()); b0 += kBlock)
        expert_block(H, F, &pairs[b0], std::min(kBlock, int64_t(pairs.size()) - b0), w_in, w_out,
                     ps.backward, dw_in, dw_out, scratch);
    }
    if (dw_in && ps.expert_grads) ps.expert_grads(e, dw_in, dw_out);
  }
}

// The shared experts for the own tokens of ps (ReferenceMath::shared_experts): each own token is
// a pair of weight 1 with every shared expert; with FP8, the own tokens' operands
// (shared_operand) are quantized as wholes.
void run_shared(const ReferenceProblem& prob, const ExpertsPass& ps,
                const Fp8Arithmetic* arith = nullptr) {
  const int64_t H = prob.model.hidden, F = prob.model.shared_ffn, S = prob.model.shared_experts;
  const bool fp8 = prob.precision != Precision::kBf16;
  BlockScratch scratch(H, F);
  std::vector<Pair> pairs;
  std::vector<int64_t> tokens;
  const Fp8Arithmetic own_arith = fp8 && !arith ? float64_arithmetic(prob) : Fp8Arithmetic{};
  if (fp8 && !arith) arith = &own_arith;
  for (int64_t t = ps.token_begin; t < ps.token_end; ++t) {
    const int64_t r = t - ps.token_begin;
    pairs.push_back({&prob.x[t * H], &prob.dout[t * H], 1.0, ps.out ? ps.out + r * H : nullptr,
                     nullptr, ps.backward && ps.dx ? ps.dx + r * H : nullptr});
    tokens.push_back(t);
  }
  for (int64_t s = 0; s < S; ++s) {
    double* dw_in = ps.backward && ps.dw_in ? ps.dw_in + s * H * 2 * F : nullptr;
    double* dw_out = ps.backward && ps.dw_out ? ps.dw_out + s * F * H : nullptr;
    if (fp8) {
      experts_fp8_by_operand(prob, pairs, tokens, prob.shared_operand, {}, true, s, F, false,
                             ps.backward, *arith, dw_in, dw_out);
      continue;
    }
    const double* w_in = &prob.w_sh_in[s * H * 2 * F];
    const double* w_out = &prob.w_sh_out[s * F * H];
    for (int64_t b0 = 0; b0 < int64_t(pairs.size()); b0 += kBlock)
      expert_block(H, F, &pairs[b0], std::min(kBlock, int64_t(pairs.size()) - b0), w_in, w_out,
                   ps.backward, dw_in, dw_out, scratch);
  }
}

void check_problem(const ReferenceProblem& prob) {
  const auto& m = prob.model;
  const int64_t N = prob.tokens, H = m.hidden, F = m.ffn, E = m.experts;
  MOE_CHECK(N > 0 && H > 0 && F > 0 && E > 0 && m.topk > 0 && m.topk <= E,
            "bad shape N " << N << " H " << H << " F " << F << " E " << E << " K " << m.topk);
  MOE_CHECK(m.shared_experts == 0 || m.shared_ffn > 0,
            "shared experts " << m.shared_experts << " of width " << m.shared_ffn);
  MOE_CHECK(int64_t(prob.x.size()) == N * H && int64_t(prob.dout.size()) == N * H,
            "x / dout must hold N * H = " << N * H << " values");
  MOE_CHECK(!prob.router.expert_bias || int64_t(prob.expert_bias.size()) == E,
            "expert_bias must hold E = " << E << " values");
  for (const std::vector<int32_t>* ids :
       {&prob.gemm_operand, &prob.wgrad_operand, &prob.shared_operand}) {
    MOE_CHECK(ids->empty() || int64_t(ids->size()) == N, "FP8 operand ids must hold N values");
    for (int32_t id : *ids) MOE_CHECK(id >= 0 && id < N, "FP8 operand id " << id);
  }
}

void check_weights(const ReferenceProblem& prob) {
  const auto& m = prob.model;
  const int64_t H = m.hidden, F = m.ffn, E = m.experts;
  MOE_CHECK(int64_t(prob.w_gate.size()) == H * E, "w_gate must hold H * E = " << H * E);
  MOE_CHECK(int64_t(prob.w_in.size()) == E * H * 2 * F, "w_in must hold E * H * 2F");
  MOE_CHECK(int64_t(prob.w_out.size()) == E * F * H, "w_out must hold E * F * H");
  const int64_t S = m.shared_experts, Fs = m.shared_ffn;
  MOE_CHECK(int64_t(prob.w_sh_in.size()) == S * H * 2 * Fs, "w_sh_in must hold S * H * 2F_sh");
  MOE_CHECK(int64_t(prob.w_sh_out.size()) == S * Fs * H, "w_sh_out must hold S * F_sh * H");
}

class CpuMath : public ReferenceMath {
 public:
  explicit CpuMath(const ReferenceProblem& prob) : prob_(prob) {
    check_problem(prob);
    check_weights(prob);
  }
  std::string name() const override { return "cpu float64"; }
  std::vector<double> logits() override { return all_logits(prob_); }
  void experts(const int32_t* idx, const uint8_t* dropped, const double* p,
               const ExpertsPass& pass) override {
    run_experts(prob_, idx, dropped, p, pass);
  }
  void shared_experts(const ExpertsPass& pass) override { run_shared(prob_, pass); }
  void router_backward(int64_t token_begin, int64_t token_end, const double* dlogits, double* dx,
                       double* dw_gate) override {
    const int64_t H = prob_.model.hidden, E = prob_.model.experts;
    for (int64_t t = token_begin; t < token_end; ++t) {
      const double* x = &prob_.x[t * H];
      const double* dl = &dlogits[(t - token_begin) * E];
      double* dxt = &dx[(t - token_begin) * H];
      for (int64_t h = 0; h < H; ++h) {
        double acc = 0;
        for (int64_t e = 0; e < E; ++e) {
          acc += dl[e] * prob_.w_gate[h * E + e];
          dw_gate[h * E + e] += x[h] * dl[e];
        }
        dxt[h] += acc;
      }
    }
  }

 private:
  const ReferenceProblem& prob_;
};

// Whether got [K] names K distinct experts in [0, E); a backend's idx is taken only if it does.
bool valid_set(const int32_t* got, int64_t E, int64_t K) {
  for (int64_t k = 0; k < K; ++k) {
    if (got[k] < 0 || got[k] >= E) return false;
    for (int64_t j = 0; j < k; ++j)
      if (got[j] == got[k]) return false;
  }
  return true;
}

bool same_set(const int32_t* a, const int32_t* b, int64_t K) {
  std::vector<int32_t> va(a, a + K), vb(b, b + K);
  std::sort(va.begin(), va.end());
  std::sort(vb.begin(), vb.end());
  return va == vb;
}

// The world's [world * n] of a per-rank [n] tensor, or empty when any rank has none (collective:
// every rank takes the same branch).
template <typename T>
std::vector<T> allgather_if_all_have(const T* mine, int64_t n, MPI_Datatype type, MPI_Comm world,
                                     double timeout_s) {
  int have = mine != nullptr;
  allreduce_bounded(&have, 1, MPI_INT, MPI_MIN, world, "the reference's gather", timeout_s);
  std::vector<T> all;
  if (!have) return all;
  int world_size = 0;
  MPI_CHECK(MPI_Comm_size(world, &world_size));
  all.resize(size_t(n) * world_size);
  allgather_bounded(mine, all.data(), int(n), type, world, "the reference's gather", timeout_s);
  return all;
}

std::vector<double> to_double(const std::vector<float>& v) {
  std::vector<double> out;
  convert_into(v.data(), int64_t(v.size()), out);
  return out;
}

// The capacity drops of one source group's rows for one expert, `rows` in (t, k) order: beyond
// the capacity, the later rows (by position) or those of lowest p (ties: the later row).
void drop_over_capacity(const ReferenceProblem& prob, std::vector<int64_t> rows, const double* p,
                        uint8_t* dropped) {
  if (int64_t(rows.size()) <= prob.capacity) return;
  if (!prob.drop_by_position)
    std::stable_sort(rows.begin(), rows.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  for (size_t i = size_t(prob.capacity); i < rows.size(); ++i) dropped[rows[i]] = 1;
}

// Whether the backend's drops for these rows differ from the reference's only at a near tie in p:
// it keeps as many rows, and every row the two treat differently has p within 1e-3 relative of
// the last row the reference keeps (position drops have no ties).
bool drop_swap_ok(const ReferenceProblem& prob, const std::vector<int64_t>& rows, const double* p,
                  const uint8_t* ref, const uint8_t* got) {
  if (prob.drop_by_position) return false;
  int64_t kept_ref = 0, kept_got = 0;
  double boundary = INFINITY;
  for (int64_t r : rows) {
    kept_ref += !ref[r];
    kept_got += !got[r];
    if (!ref[r]) boundary = std::min(boundary, p[r]);
  }
  if (kept_ref != kept_got) return false;
  for (int64_t r : rows)
    if (ref[r] != got[r] && std::fabs(p[r] - boundary) > 1e-3 * std::fabs(boundary)) return false;
  return true;
}

// MATH.md has no capacity; this is moebench's (README "Capacity"): per source group and expert,
// the reference's own drops, the backend's adopted where they differ only at a near tie.
std::vector<uint8_t> capacity_drops(const ReferenceProblem& prob, const int32_t* idx,
                                    const double* p, const uint8_t* got_dropped,
                                    ReferenceResult& res) {
  const int64_t N = prob.tokens, E = prob.model.experts, K = prob.model.topk;
  std::vector<uint8_t> dropped(N * K, 0);
  if (prob.capacity <= 0) return dropped;
  const int64_t group = prob.capacity_group;
  MOE_CHECK(group > 0 && N % group == 0,
            "capacity_group " << group << " must divide the token count " << N);
  std::vector<std::vector<int64_t>> rows(E);
  for (int64_t g0 = 0; g0 < N; g0 += group) {
    for (auto& r : rows) r.clear();
    for (int64_t i = g0 * K; i < (g0 + group) * K; ++i) rows[idx[i]].push_back(i);
    for (int64_t e = 0; e < E; ++e) {
      drop_over_capacity(prob, rows[e], p, dropped.data());
      if (!got_dropped) continue;
      int64_t differ = 0;
      for (int64_t r : rows[e]) differ += dropped[r] != got_dropped[r];
      if (differ == 0) continue;
      if (drop_swap_ok(prob, rows[e], p, dropped.data(), got_dropped)) {
        res.drop_near_ties += differ;
        for (int64_t r : rows[e]) dropped[r] = got_dropped[r];
      } else {
        res.drop_mismatches += differ;
      }
    }
  }
  return dropped;
}

}  // namespace

void fp8_experts(const ReferenceProblem& prob, const int32_t* idx, const uint8_t* dropped,
                 const double* p, const ExpertsPass& pass, const Fp8Arithmetic& arith) {
  MOE_CHECK(prob.precision != Precision::kBf16, "fp8_experts with precision bf16");
  run_experts(prob, idx, dropped, p, pass, &arith);
}

void fp8_shared_experts(const ReferenceProblem& prob, const ExpertsPass& pass,
                        const Fp8Arithmetic& arith) {
  MOE_CHECK(prob.precision != Precision::kBf16, "fp8_shared_experts with precision bf16");
  run_shared(prob, pass, &arith);
}

std::unique_ptr<ReferenceMath> cpu_reference_math(const ReferenceProblem& prob) {
  return std::make_unique<CpuMath>(prob);
}

ReferenceResult reference_step(const ReferenceProblem& prob, const int32_t* got_idx,
                               const uint8_t* got_dropped, int64_t token_begin, int64_t token_end,
                               int64_t expert_begin, int64_t expert_end) {
  CpuMath math(prob);
  return reference_step(prob, math, got_idx, got_dropped, token_begin, token_end, expert_begin,
                        expert_end);
}

ReferenceResult reference_step(const ReferenceProblem& prob, ReferenceMath& math,
                               const int32_t* got_idx, const uint8_t* got_dropped,
                               int64_t token_begin, int64_t token_end, int64_t expert_begin,
                               int64_t expert_end, const ExpertGradSink& expert_grads,
                               const RoutedSum& routed_sum) {
  const int64_t E = prob.model.experts;
  MOE_CHECK(
      0 <= expert_begin && expert_begin <= expert_end && expert_end <= E,
      "local experts [" << expert_begin << ", " << expert_end << ") outside [0, " << E << ")");
  std::vector<int32_t> local(size_t(expert_end - expert_begin));
  for (size_t i = 0; i < local.size(); ++i) local[i] = int32_t(expert_begin + int64_t(i));
  return reference_step(prob, math, got_idx, got_dropped, token_begin, token_end, local,
                        expert_grads, routed_sum);
}

ReferenceResult reference_step(const ReferenceProblem& prob, ReferenceMath& math,
                               const int32_t* got_idx, const uint8_t* got_dropped,
                               int64_t token_begin, int64_t token_end,
                               const std::vector<int32_t>& local_experts,
                               const ExpertGradSink& expert_grads, const RoutedSum& routed_sum) {
  check_problem(prob);
  const RouterConfig& rc = prob.router;
  const int64_t N = prob.tokens, H = prob.model.hidden, F = prob.model.ffn;
  const int64_t E = prob.model.experts, K = prob.model.topk;
  MOE_CHECK(0 <= token_begin && token_begin <= token_end && token_end <= N,
            "own tokens [" << token_begin << ", " << token_end << ") outside [0, " << N << ")");
  std::vector<int32_t> local_index(size_t(E), -1);
  for (size_t i = 0; i < local_experts.size(); ++i) {
    const int32_t e = local_experts[i];
    MOE_CHECK(0 <= e && e < E && (i == 0 || local_experts[i - 1] < e),
              "local experts must be ascending ids in [0, " << E << "); got " << e);
    local_index[size_t(e)] = int32_t(i);
  }
  const double* bias = rc.expert_bias ? prob.expert_bias.data() : nullptr;

  // Routing for all N tokens: the aux counts and the near-tie decisions need the world's tokens.
  ReferenceResult res;
  res.math = math.name();
  const std::vector<double> logits = math.logits();
  MOE_CHECK(int64_t(logits.size()) == N * E, math.name() << " gave " << logits.size() << " logits");
  std::vector<int32_t> idx(N * K);
  std::vector<double> p(N * K);
  const bool forced = !prob.forced_idx.empty();
  MOE_CHECK(!forced || int64_t(prob.forced_idx.size()) == N * K, "forced_idx must hold N * K");
  for (int64_t t = 0; t < N; ++t) {
    if (forced) {  // the experts are given: the gate only weighs them
      std::copy(&prob.forced_idx[t * K], &prob.forced_idx[(t + 1) * K], &idx[t * K]);
      reference_topk_weights(rc, E, K, &logits[t * E], &idx[t * K], &p[t * K]);
      if (got_idx && !same_set(&idx[t * K], got_idx + t * K, K)) ++res.routing_mismatches;
      continue;
    }
    TokenRouting tr = reference_route_token(rc, E, K, &logits[t * E], bias);
    std::copy(tr.idx.begin(), tr.idx.end(), &idx[t * K]);
    std::copy(tr.p.begin(), tr.p.end(), &p[t * K]);
    if (!got_idx) continue;
    const int32_t* got = got_idx + t * K;
    if (same_set(tr.idx.data(), got, K)) continue;
    // A near tie may flip either way in fp32: follow the backend there, so that its out and
    // gradients are compared against the same function. Elsewhere a different set is an error.
    if (tr.near_tie && valid_set(got, E, K) &&
        reference_near_tie_swap_ok(rc, E, K, &logits[t * E], bias, tr, got)) {
      ++res.routing_near_ties;
      std::copy(got, got + K, &idx[t * K]);
      reference_topk_weights(rc, E, K, &logits[t * E], got, &p[t * K]);
    } else {
      ++res.routing_mismatches;
    }
  }
  // The aux loss counts the routed rows, before any capacity drop.
  const std::vector<double> counts = expert_counts(idx.data(), N, E, K);
  reference_router_losses(rc, N, E, K, logits.data(), counts.data(), &res.aux, &res.z);
  const std::vector<uint8_t> dropped = capacity_drops(prob, idx.data(), p.data(), got_dropped, res);

  // The expert FFNs: own tokens' out, dp and expert-path dx; local experts' dw over all N tokens.
  const int64_t T = token_end - token_begin, E_local = int64_t(local_experts.size());
  res.out.assign(T * H, 0.0);
  res.dx.assign(T * H, 0.0);
  if (!expert_grads) {
    res.dw_in.assign(E_local * H * 2 * F, 0.0);
    res.dw_out.assign(E_local * F * H, 0.0);
  }
  std::vector<double> dp(T * K, 0.0);
  ExpertsPass pass;
  pass.token_begin = token_begin;
  pass.token_end = token_end;
  pass.local_index = std::move(local_index);
  pass.backward = true;
  pass.out = res.out.data();
  pass.dp = dp.data();
  pass.dx = res.dx.data();
  pass.dw_in = expert_grads ? nullptr : res.dw_in.data();
  pass.dw_out = expert_grads ? nullptr : res.dw_out.data();
  pass.expert_grads = expert_grads;
  if (routed_sum) {
    // By expert: the local experts' rows of every token, then the world's sums.
    std::vector<double> out_all(N * H, 0.0), dp_all(N * K, 0.0), dx_all(N * H, 0.0);
    ExpertsPass all = pass;
    all.token_begin = 0;
    all.token_end = N;
    all.local_only = true;
    all.out = out_all.data();
    all.dp = dp_all.data();
    all.dx = dx_all.data();
    math.experts(idx.data(), dropped.data(), p.data(), all);
    routed_sum(out_all, dp_all, dx_all);
    std::copy(&out_all[token_begin * H], &out_all[token_end * H], res.out.begin());
    std::copy(&dp_all[token_begin * K], &dp_all[token_end * K], dp.begin());
    std::copy(&dx_all[token_begin * H], &dx_all[token_end * H], res.dx.begin());
  } else {
    math.experts(idx.data(), dropped.data(), p.data(), pass);
  }
  pass.expert_grads = nullptr;
  if (prob.model.shared_experts > 0) {
    const int64_t S = prob.model.shared_experts, Fs = prob.model.shared_ffn;
    res.dw_sh_in.assign(S * H * 2 * Fs, 0.0);
    res.dw_sh_out.assign(S * Fs * H, 0.0);
    pass.dp = nullptr;
    pass.dw_in = res.dw_sh_in.data();
    pass.dw_out = res.dw_sh_out.data();
    math.shared_experts(pass);
  }

  // Own tokens: the loss's part, and the router's backward from dp plus aux and z.
  res.idx.assign(idx.begin() + token_begin * K, idx.begin() + token_end * K);
  res.p.assign(p.begin() + token_begin * K, p.begin() + token_end * K);
  res.dropped.assign(dropped.begin() + token_begin * K, dropped.begin() + token_end * K);
  res.dw_gate.assign(H * E, 0.0);
  std::vector<double> dlogits(T * E, 0.0);
  double dot = 0;
  for (int64_t t = token_begin; t < token_end; ++t) {
    const double* dout = &prob.dout[t * H];
    const double* out = &res.out[(t - token_begin) * H];
    for (int64_t h = 0; h < H; ++h) dot += out[h] * dout[h];
    double* dl = &dlogits[(t - token_begin) * E];
    reference_topk_weights_bwd(rc, E, K, &logits[t * E], &idx[t * K], &dp[(t - token_begin) * K],
                               dl);
    reference_router_losses_bwd(rc, N, E, K, &logits[t * E], counts.data(), dl);
  }
  // dx += dlogits @ w_gate^T;  dw_gate += x^T dlogits.
  math.router_backward(token_begin, token_end, dlogits.data(), res.dx.data(), res.dw_gate.data());
  res.loss = dot + res.aux + res.z;
  return res;
}

double reference_loss(const ReferenceProblem& prob, const int32_t* idx, const uint8_t* dropped) {
  check_problem(prob);
  check_weights(prob);
  const RouterConfig& rc = prob.router;
  const int64_t N = prob.tokens, H = prob.model.hidden;
  const int64_t E = prob.model.experts, K = prob.model.topk;
  for (int64_t i = 0; i < N * K; ++i) MOE_CHECK(idx[i] >= 0 && idx[i] < E, "bad idx " << idx[i]);

  const std::vector<double> logits = all_logits(prob);
  std::vector<double> p(N * K), out(N * H, 0.0);
  for (int64_t t = 0; t < N; ++t)
    reference_topk_weights(rc, E, K, &logits[t * E], &idx[t * K], &p[t * K]);
  ExpertsPass pass;
  pass.token_end = N;
  pass.out = out.data();
  run_experts(prob, idx, dropped, p.data(), pass);
  if (prob.model.shared_experts > 0) run_shared(prob, pass);
  double dot = 0;
  for (int64_t i = 0; i < N * H; ++i) dot += out[i] * prob.dout[i];
  const std::vector<double> counts = expert_counts(idx, N, E, K);
  double aux = 0, z = 0;
  reference_router_losses(rc, N, E, K, logits.data(), counts.data(), &aux, &z);
  return dot + aux + z;
}

std::unique_ptr<ReferenceMath> cpu_reference_math_from_seed(const Workload& w,
                                                            ReferenceProblem& prob) {
  const int64_t H = w.model.hidden, F = w.model.ffn, E = w.model.experts;
  const int64_t S = w.model.shared_experts, Fs = w.model.shared_ffn_used();
  // Through a float buffer of one expert at a time, to keep the staging small.
  std::vector<float> buf;
  auto fill = [&](const InitRule& rule, int64_t n, int64_t chunk, std::vector<double>& dst) {
    dst.resize(n);
    buf.resize(std::max<int64_t>(std::min(chunk, n), 1));
    for (int64_t b = 0; b < n; b += chunk) {
      const int64_t e = std::min(n, b + chunk);
      init_range(rule, b, e, buf.data());
      std::copy(buf.begin(), buf.begin() + (e - b), dst.begin() + b);
    }
  };
  fill(w_gate_rule(w), H * E, H * E, prob.w_gate);
  fill(w_in_rule(w), E * H * 2 * F, H * 2 * F, prob.w_in);
  fill(w_out_rule(w), E * F * H, F * H, prob.w_out);
  fill(w_sh_in_rule(w), S * H * 2 * Fs, H * 2 * Fs, prob.w_sh_in);
  fill(w_sh_out_rule(w), S * Fs * H, Fs * H, prob.w_sh_out);
  return cpu_reference_math(prob);
}

ReferenceResult compute_reference(const Workload& w, const Mesh& mesh, MPI_Comm world,
                                  const ReferenceInputs& in,
                                  const ReferenceMathFactory& make_math) {
  int world_size = 0, rank = 0;
  MPI_CHECK(MPI_Comm_size(world, &world_size));
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  const ModelShape& m = w.model;
  const int64_t T = w.tokens_per_rank, H = m.hidden, E = m.experts, K = m.topk;
  const int64_t N = T * world_size;
  MOE_CHECK(in.x && in.dout, "reference needs x and dout");
  MOE_CHECK(mesh.experts == E && mesh.experts_end - mesh.experts_begin == mesh.experts_per_rank,
            "mesh experts " << mesh.experts << " vs model experts " << E);
  MOE_CHECK(T * H <= INT_MAX && T * K <= INT_MAX, "per-rank tensors too large for one MPI count");

  std::vector<int32_t> experts;
  if (in.experts)
    experts = *in.experts;
  else
    for (int64_t e = mesh.experts_begin; e < mesh.experts_end; ++e) experts.push_back(int32_t(e));

  ReferenceProblem prob;
  prob.tokens = N;
  prob.model = m;
  prob.router = w.router;
  if (routing_is_forced(w)) {
    prob.forced_idx.resize(N * K);
    forced_routing(w, in.step, 0, N, prob.forced_idx.data());
  }
  prob.capacity = expert_capacity(w);
  // One source rank's tokens, or one chunk of them in a pipelined step (expert_capacity's group).
  prob.capacity_group = T / step_chunks(w);
  prob.drop_by_position = w.drop_policy == DropPolicy::kPosition;
  prob.precision = w.precision;
  prob.dispatch_fp8 = w.dispatch_dtype == DispatchDtype::kFp8;
  if (w.precision != Precision::kBf16) {
    // An expert's GEMM takes the rows of one EP group's tokens (consecutive ranks, core/mesh.h),
    // of one chunk of them in a pipelined step; the shared experts' take each rank's own tokens,
    // which are the only ones they get here.
    // The weight gradients take every chunk's rows in one GEMM (core/moe_layer.cpp).
    const int64_t chunk = T / step_chunks(w);
    prob.gemm_operand.resize(N);
    for (int64_t t = 0; t < N; ++t)
      prob.gemm_operand[t] = int32_t((t / T / mesh.ep) * (T / chunk) + (t % T) / chunk);
    if (chunk < T) {
      prob.wgrad_operand.resize(N);
      for (int64_t t = 0; t < N; ++t) prob.wgrad_operand[t] = int32_t(t / T / mesh.ep);
    }
  }
  // fp8_tensor: the backend's scales of those operands, the world's table from every rank's own
  // (its EP group's operands of the experts it holds, 0 elsewhere), taken at near ties.
  Fp8ScaleAdoptions adoptions;
  if (w.precision == Precision::kFp8Tensor) {
    const int64_t chunks = step_chunks(w), per_group = chunks * kNumFp8Computed * E;
    Fp8GotScales& got = prob.got_scales;
    got.operands = (world_size / mesh.ep) * chunks;
    got.experts = E;
    got.scales.assign(size_t(got.operands * kNumFp8Computed * E), 0.0f);
    MOE_CHECK(got.scales.size() <= size_t(INT_MAX), "FP8 scale table too large for one MPI count");
    if (in.got_fp8_scales) {
      MOE_CHECK(
          int64_t(in.got_fp8_scales->size()) == per_group,
          "backend FP8 scales: " << in.got_fp8_scales->size() << " values, expected " << per_group);
      std::copy(in.got_fp8_scales->begin(), in.got_fp8_scales->end(),
                got.scales.begin() + (rank / mesh.ep) * per_group);
    }
    allreduce_bounded(got.scales.data(), int(got.scales.size()), MPI_FLOAT, MPI_MAX, world,
                      "the backend's FP8 scales", in.timeout_s);
    adoptions.adopted.assign(got.scales.size(), 0);
    adoptions.rel_diff.assign(got.scales.size(), 0.0f);
    prob.adoptions = &adoptions;
  }

  // The world's tokens in rank order: token g = rank * T + t.
  std::vector<float> gathered(N * H);
  MPI_CHECK(
      MPI_Allgather(in.x, int(T * H), MPI_FLOAT, gathered.data(), int(T * H), MPI_FLOAT, world));
  prob.x = to_double(gathered);
  MPI_CHECK(
      MPI_Allgather(in.dout, int(T * H), MPI_FLOAT, gathered.data(), int(T * H), MPI_FLOAT, world));
  prob.dout = to_double(gathered);
  std::vector<float>().swap(gathered);

  // The backend's routing and drops, compared only when every rank has them.
  const std::vector<int32_t> got =
      allgather_if_all_have(in.got_idx, T * K, MPI_INT32_T, world, in.timeout_s);
  const std::vector<uint8_t> got_dropped =
      allgather_if_all_have(in.got_dropped, T * K, MPI_UINT8_T, world, in.timeout_s);

  if (w.router.expert_bias) {
    std::vector<float> bias(E);
    init_expert_bias(w, bias.data());
    prob.expert_bias = to_double(bias);
  }
  std::unique_ptr<ReferenceMath> math = make_math(w, prob);
  // The routed experts by expert (reference_step): the ranks' checked experts cover every expert
  // once (each EP group holds all of them, its FSDP ranks split their own). Each rank then makes
  // and multiplies only its experts' weights, instead of every expert's for its own tokens (in FP8
  // the weights' quantization was the largest part of the GPU reference's time).
  // Where they do not (a caller's own expert ranges), or the sums exceed one MPI count, the
  // split stays by token.
  RoutedSum routed_sum;
  bool each_once = false;
  if (world_size > 1) {
    std::vector<int32_t> cover(E, 0);
    for (int32_t e : experts) cover[size_t(e)] = 1;
    allreduce_bounded(cover.data(), int(E), MPI_INT32_T, MPI_SUM, world,
                      "the reference's expert cover", in.timeout_s);
    each_once = std::all_of(cover.begin(), cover.end(), [](int32_t c) { return c == 1; });
  }
  if (each_once && N * H <= INT_MAX)
    routed_sum = [&](std::vector<double>& out, std::vector<double>& dp, std::vector<double>& dx) {
      for (std::vector<double>* v : {&out, &dp, &dx})
        allreduce_bounded(v->data(), int(v->size()), MPI_DOUBLE, MPI_SUM, world,
                          "the reference's routed-expert sums", in.timeout_s);
    };
  ReferenceResult res =
      reference_step(prob, *math, got.empty() ? nullptr : got.data(),
                     got_dropped.empty() ? nullptr : got_dropped.data(), int64_t(rank) * T,
                     int64_t(rank + 1) * T, experts, in.expert_grads, routed_sum);

  if (prob.adoptions) {
    // Each rank marked the operands it computed; an operand may be computed on several.
    allreduce_bounded(adoptions.adopted.data(), int(adoptions.adopted.size()), MPI_UINT8_T, MPI_MAX,
                      world, "the reference's FP8 scale adoptions", in.timeout_s);
    allreduce_bounded(adoptions.rel_diff.data(), int(adoptions.rel_diff.size()), MPI_FLOAT, MPI_MAX,
                      world, "the reference's FP8 scale differences", in.timeout_s);
    const std::vector<float>& got = prob.got_scales.scales;
    for (size_t i = 0; i < got.size(); ++i) {
      res.fp8_scales_reported += got[i] > 0;
      res.fp8_scales_adopted += adoptions.adopted[i];
      res.fp8_scale_adopted_max_rel =
          std::max(res.fp8_scale_adopted_max_rel, double(adoptions.rel_diff[i]));
    }
  }

  // dw_gate and the <out, dout> part of the loss were over this rank's tokens only.
  allreduce_bounded(res.dw_gate.data(), int(H * E), MPI_DOUBLE, MPI_SUM, world,
                    "the reference's dw_gate sum", in.timeout_s);
  // So were the shared experts' gradients.
  for (std::vector<double>* g : {&res.dw_sh_in, &res.dw_sh_out}) {
    if (g->empty()) continue;  // no shared experts, on every rank
    MOE_CHECK(g->size() <= size_t(INT_MAX), "shared-expert gradient too large for one MPI count");
    allreduce_bounded(g->data(), int(g->size()), MPI_DOUBLE, MPI_SUM, world,
                      "the reference's shared-expert gradient sum", in.timeout_s);
  }
  double dot = 0;
  for (int64_t i = 0; i < T * H; ++i) dot += res.out[i] * prob.dout[rank * T * H + i];
  allreduce_bounded(&dot, 1, MPI_DOUBLE, MPI_SUM, world, "the reference's loss sum", in.timeout_s);
  res.loss = dot + res.aux + res.z;
  return res;
}

}  // namespace moe
