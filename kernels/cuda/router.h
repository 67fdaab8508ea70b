#pragma once
// CUDA twins of kernels/cpu/router.h (same names, same argument order, same results within fp32
// rounding; idx identical except at exact fp32 near ties). The router GEMMs (logits, dx, dw_gate)
// are the caller's (cuBLASLt); these are the fused per-token kernels around them. fp32 math,
// deterministic: no floating-point atomics.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/router_scratch.h"
#include "core/workload.h"

namespace moe::cuda {

// Score function, group-limited top-k, gather, normalize and scaling in one kernel (one block or
// warp per token). logits [T,E] fp32, expert_bias [E] fp32 or nullptr -> scores [T,E] fp32,
// idx [T,K] i32 (descending q, ties lower id), p [T,K] fp32. forced_idx [T,K] i32 or nullptr:
// when given, idx = forced_idx and only the scores and weights are computed (routing.mode).
void router_topk(const float* logits, const float* expert_bias, const int32_t* forced_idx,
                 const RouterConfig& cfg, int64_t T, int64_t E, int64_t K, float* scores,
                 int32_t* idx, float* p, cudaStream_t stream);

// stats [2E+1] fp32 partial sums for the global losses (layout as on the CPU), deterministic
// (fixed-order reduction). scratch: device memory of at least router_loss_stats_scratch_bytes
// (core/router_scratch.h).
using moe::router_loss_stats_scratch_bytes;
void router_loss_stats(const float* logits, const float* scores, const int32_t* idx,
                       const RouterConfig& cfg, int64_t T, int64_t E, int64_t K, float* stats,
                       void* scratch, cudaStream_t stream);

// dlogits [T,E] fp32 from dp [T,K] and the world's stats [2E+1] (counts in [0,E)).
void router_bwd(const float* logits, const float* scores, const int32_t* idx, const float* dp,
                const float* global_counts, const RouterConfig& cfg, int64_t N, int64_t T,
                int64_t E, int64_t K, float* dlogits, cudaStream_t stream);

}  // namespace moe::cuda
