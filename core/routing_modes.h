#pragma once
// Forced routing (routing.mode other than "learned"): every token's K experts drawn from the seed,
// so that a user can benchmark a chosen load pattern whatever the gate would pick. The gate still
// computes the scores, weighs the chosen experts (MATH.md step 6) and is trained; only the
// selection (steps 3-5) is replaced. Like the data in core/init.h, the choice is a pure function
// of (seed, step, global token), so the backends and the reference draw the same experts.
#include <cstdint>
#include <vector>

#include "core/workload.h"

namespace moe {

bool routing_is_forced(const Workload& w);

// Experts from most to least popular: a seeded permutation of [0, E), fixed for the whole run, so
// that the hot experts of "powerlaw" and "hot" are spread over the EP ranks by chance rather than
// all sitting on rank 0.
std::vector<int32_t> expert_popularity_order(const Workload& w);

// idx [num_tokens, K]: the experts of global tokens [token_begin, token_begin + num_tokens) (token
// g = rank * T + t) at `step`, K distinct ids per token in ascending order.
//   uniform   K experts uniformly at random.
//   balanced  token g takes experts (g*K + k + shift) mod E, shift drawn per step: every expert
//             gets exactly N*K/E rows when E divides N*K (and within one row otherwise), on every
//             rank when E divides T*K.
//   powerlaw  expert of popularity rank r has weight 1 / (r + 1)^skew; K drawn without
//             replacement in proportion to the weights.
//   hot       a token is hot with probability hot_fraction; a hot token takes min(K, hot_experts)
//             of the hot experts (the most popular ones) and the rest of its K uniformly from the
//             others; every other token takes K uniformly from all E.
void forced_routing(const Workload& w, int64_t step, int64_t token_begin, int64_t num_tokens,
                    int32_t* idx);

// Rows one source rank may send each expert: ceil(capacity_factor * T * K / E), at least 1; 0 when
// the workload is dropless (capacity_factor null). Per source rank, as Megatron-Core's token
// dropping does, so that the drop decision needs no communication; with overlap = pipeline per
// chunk of the rank's tokens (T / overlap_chunks in place of T), each chunk being dispatched alone.
int64_t expert_capacity(const Workload& w);

}  // namespace moe
