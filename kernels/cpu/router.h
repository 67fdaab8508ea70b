#pragma once
// Router on the CPU (MATH.md steps 1-6, the losses, and their backward). fp32 math throughout,
// as the CUDA router does; x and w_gate hold values already rounded to the storage dtype.
#include <cstdint>

#include "core/workload.h"

namespace moe::cpu {

// logits [T, E] fp32 = x [T, H] @ w_gate [H, E], fp32 accumulation.
void router_logits(const float* x, const float* w_gate, int64_t T, int64_t H, int64_t E,
                   float* logits);

// Score function, group-limited top-k, gather, normalize and scaling (MATH.md 2-6).
// expert_bias [E] fp32 or nullptr (selection only). forced_idx [T, K] or nullptr: when given, the
// selection (steps 3-5) is skipped and idx = forced_idx (routing.mode other than learned).
// Outputs: scores [T, E] fp32 = s (softmax or sigmoid of the logits, saved for backward); idx
// [T, K] int32, sorted by descending selection score q (ties: lower expert id first); p [T, K]
// fp32 final weights (after normalize, scaling).
void router_topk(const float* logits, const float* expert_bias, const int32_t* forced_idx,
                 const RouterConfig& cfg, int64_t T, int64_t E, int64_t K, float* scores,
                 int32_t* idx, float* p);

// This rank's partial sums for the global losses, to be summed over the world:
// stats [2E + 1] fp32: [0, E) = c_e (rows routed to e), [E, 2E) = sum_t r[t, e] (r as in MATH.md's
// aux loss), [2E] = sum_t logsumexp(logits[t, :])^2.
void router_loss_stats(const float* logits, const float* scores, const int32_t* idx,
                       const RouterConfig& cfg, int64_t T, int64_t E, int64_t K, float* stats);

// dlogits [T, E] fp32 = dL/dlogits for L = sum_{t,k} p[t,k] dp[t,k] + aux + z, where dp [T, K] fp32
// = dL/dp and global_counts [E] = the world's c_e (constants). Goes back through scaling,
// normalize_topk, the gather (or the top-k softmax), the score function, and adds the aux and z
// gradients (zero when their coefficients are 0).
void router_bwd(const float* logits, const float* scores, const int32_t* idx, const float* dp,
                const float* global_counts, const RouterConfig& cfg, int64_t N, int64_t T,
                int64_t E, int64_t K, float* dlogits);

// dx_acc [T, H] fp32 += dlogits [T, E] @ w_gate^T;  dw_gate [H, E] fp32 = x^T @ dlogits
// (overwritten: this rank's part, before the world all-reduce).
void router_input_grads(const float* x, const float* w_gate, const float* dlogits, int64_t T,
                        int64_t H, int64_t E, float* dx_acc, float* dw_gate);

}  // namespace moe::cpu
