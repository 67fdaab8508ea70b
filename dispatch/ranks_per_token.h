#pragma once
// How many EP ranks one token's K routed experts sit on, on average: the wire rows per token of
// dispatch alltoall_dedup (one per rank reached), which its byte prediction, the cost model and
// the memory estimate plan for. The all-to-all's rows per token are K whatever the spread.
#include <cstdint>

#include "core/workload.h"

namespace moe {

// Over tokens routed as w.routing.mode routes them (w.model, w.router), on an EP group of ep:
// - balanced: each token takes K consecutive experts (core/routing_modes.h) from starts spread
//   evenly over the experts: exact where K and E are coprime and E divides tokens_per_rank,
//   else the mean over the step's shift;
// - learned: the router at initialisation: Gk of the G groups, then K of their experts, each
//   uniformly at random (router.groups, router.group_topk; G 1 is no group limit);
// - uniform, powerlaw, hot: K of the E experts uniformly at random (powerlaw and hot crowd tokens
//   onto popular experts, so they reach fewer ranks than this).
double ranks_per_token(const Workload& w, int64_t ep);

// The same for explicit shapes: E experts over ep ranks, K per token; consecutive (balanced) or
// random in G groups of which Gk are kept.
double ranks_per_token_balanced(int64_t E, int64_t K, int64_t ep);
double ranks_per_token_random(int64_t E, int64_t K, int64_t ep, int64_t G, int64_t Gk);

// Wire rows a rank sends per step (one per token and rank reached: alltoall_dedup's and nvlink's)
// when it routes rows_per_rank of its T * K rows (fewer in proportion where the capacity drops
// some), on an EP group of ep.
double wire_rows_per_rank(const Workload& w, int64_t ep, double rows_per_rank);

}  // namespace moe
