#pragma once
// Deterministic data. Every value is a pure function of (seed, tensor, global index), so that a
// global expert's weights do not depend on the mesh and any rank (or the reference) can regenerate
// any tensor without communication. Values are returned already rounded to the storage dtype.
#include <cstdint>

#include "core/workload.h"

namespace moe {

// Uniform in [-1, 1) from a counter-based hash (splitmix64); no state, no order dependence.
float hashed_uniform(uint64_t seed, uint64_t stream, uint64_t index);

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
