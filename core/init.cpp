#include "core/init.h"

#include <algorithm>
#include <cmath>

#include "core/bf16.h"
#include "core/parallel.h"

namespace moe {
namespace {

enum Stream : uint64_t {
  kWGate = 1,
  kBias = 2,
  kWIn = 3,
  kWOut = 4,
  kX = 5,
  kDout = 6,
  kWShIn = 7,
  kWShOut = 8
};

// Uniform with the given standard deviation: U(-1,1) has std 1/sqrt(3).
InitRule rule(const Workload& w, uint64_t stream, float std_dev) {
  InitRule r;
  r.seed = w.seed;
  r.stream = stream;
  r.scale = std_dev * std::sqrt(3.0f);
  r.bf16 = w.dtype == DType::kBf16;
  return r;
}

uint64_t token_stream(uint64_t base, int rank, int64_t step) {
  return base | (uint64_t(step) << 8) | (uint64_t(rank) << 40);
}

}  // namespace

// Every element is independent, so large ranges (a DeepSeek-V3 rank holds billions) are split
// over threads.
void init_range(const InitRule& r, int64_t begin, int64_t end, float* out) {
  for_each_element(end - begin, [&](int64_t i) { out[i] = r.value(uint64_t(begin + i)); });
}

InitRule w_gate_rule(const Workload& w) {
  return rule(w, kWGate, 1.0f / std::sqrt(float(w.model.hidden)));
}
InitRule w_in_rule(const Workload& w) {
  return rule(w, kWIn, 1.0f / std::sqrt(float(w.model.hidden)));
}
InitRule w_out_rule(const Workload& w) {
  return rule(w, kWOut, 1.0f / std::sqrt(float(w.model.ffn)));
}
InitRule w_sh_in_rule(const Workload& w) {
  return rule(w, kWShIn, 1.0f / std::sqrt(float(w.model.hidden)));
}
InitRule w_sh_out_rule(const Workload& w) {
  return rule(w, kWShOut, 1.0f / std::sqrt(float(std::max<int64_t>(w.model.shared_ffn, 1))));
}
InitRule x_rule(const Workload& w, int rank, int64_t step) {
  return rule(w, token_stream(kX, rank, step), 1.0f);
}
InitRule dout_rule(const Workload& w, int rank, int64_t step) {
  return rule(w, token_stream(kDout, rank, step), 1.0f);
}

void init_w_gate(const Workload& w, float* out) {
  init_range(w_gate_rule(w), 0, w.model.hidden * w.model.experts, out);
}

void init_expert_bias(const Workload& w, float* out) {
  for (int64_t e = 0; e < w.model.experts; ++e) out[e] = 0.1f * hashed_uniform(w.seed, kBias, e);
}

void init_w_in_range(const Workload& w, int64_t begin, int64_t end, float* out) {
  init_range(w_in_rule(w), begin, end, out);
}

void init_w_out_range(const Workload& w, int64_t begin, int64_t end, float* out) {
  init_range(w_out_rule(w), begin, end, out);
}

void init_x(const Workload& w, int rank, int64_t step, float* out) {
  init_range(x_rule(w, rank, step), 0, w.tokens_per_rank * w.model.hidden, out);
}

void init_dout(const Workload& w, int rank, int64_t step, float* out) {
  init_range(dout_rule(w, rank, step), 0, w.tokens_per_rank * w.model.hidden, out);
}

}  // namespace moe
