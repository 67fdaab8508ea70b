#pragma once
// Dispatch layout (the DeepEP layout contract): computed once from the routing and reused by
// dispatch, combine and both of their backward passes.
#include <cstdint>

namespace moe::cpu {

// expert_counts [E] int32: rows (t, k) routed to each global expert. send_pos [T*K] int32: the row
// of (t, k) in the send buffer, which is ordered by expert, then by t*K + k. Experts of one EP rank
// are contiguous, so the buffer is also ordered by destination rank.
void dispatch_layout(const int32_t* idx, int64_t T, int64_t K, int64_t E, int32_t* expert_counts,
                     int32_t* send_pos);

}  // namespace moe::cpu
