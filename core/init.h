#pragma once
// Deterministic data. Every value is a pure function of (seed, tensor, global index), so that a
// global expert's weights do not depend on the mesh and any rank (or the reference) can regenerate
// any tensor without communication. Values are returned already rounded to the storage dtype.
#include <cstdint>

#include "core/bf16.h"
#include "core/hd.h"
#include "core/workload.h"

namespace moe {

MOE_HD inline uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1) from a counter-based hash (splitmix64); no state, no order dependence.
MOE_HD inline float hashed_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t h = splitmix64(splitmix64(seed ^ splitmix64(stream)) ^ index);
  return float(int64_t(h >> 40) - (int64_t(1) << 23)) * (1.0f / float(1 << 23));
}

// How a weight tensor's element i is made: scale * hashed_uniform(seed, stream, i), rounded to
// bf16 when the workload stores bf16. Exposed so that the GPU reference generates the same values
// on the device (kernels/cuda/reference.cu) instead of copying billions of them from the host.
struct InitRule {
  uint64_t seed = 0, stream = 0;
  float scale = 0;
  bool bf16 = false;
  MOE_HD float value(uint64_t i) const {
    const float v = scale * hashed_uniform(seed, stream, i);
    return bf16 ? round_to_bf16(v) : v;
  }
};
InitRule w_gate_rule(const Workload& w);
InitRule w_in_rule(const Workload& w);
InitRule w_out_rule(const Workload& w);
// The shared experts' flattened w_sh_in [S, H, 2F_sh] (std 1/sqrt(H)) and w_sh_out [S, F_sh, H]
// (std 1/sqrt(F_sh)): streams of their own, so that adding shared experts changes no other value.
InitRule w_sh_in_rule(const Workload& w);
InitRule w_sh_out_rule(const Workload& w);
InitRule x_rule(const Workload& w, int rank, int64_t step);
InitRule dout_rule(const Workload& w, int rank, int64_t step);

// out[i - begin] = rule.value(i) for i in [begin, end), on the host's threads.
void init_range(const InitRule& rule, int64_t begin, int64_t end, float* out);

// [H, E]: router weight, std 1/sqrt(H).
void init_w_gate(const Workload& w, float* out);
// [E]: fp32 selection bias in [-0.1, 0.1) (only meaningful when router.expert_bias).
void init_expert_bias(const Workload& w, float* out);
// Rows [row_begin, row_end) of the flattened w_in [E, H, 2F] / w_out [E, F, H] (std 1/sqrt(H),
// 1/sqrt(F)); a flat range so that an FSDP shard can be generated directly.
void init_w_in_range(const Workload& w, int64_t begin, int64_t end, float* out);
void init_w_out_range(const Workload& w, int64_t begin, int64_t end, float* out);
// [T, H] tokens of `rank` at `step`: x has std 1, dout std 1.
void init_x(const Workload& w, int rank, int64_t step, float* out);
void init_dout(const Workload& w, int rank, int64_t step, float* out);

}  // namespace moe
