#pragma once
// Dispatch layout (the DeepEP layout contract): computed once from the routing and reused by
// dispatch, combine and both of their backward passes.
#include <cstdint>

namespace moe::cpu {

// expert_counts [E] int32: rows (t, k) sent to each global expert. send_pos [T*K] int32: the row
// of (t, k) in the send buffer, which is ordered by expert, then by t*K + k. Experts of one EP rank
// are contiguous, so the buffer is also ordered by destination rank.
//
// Capacity (capacity > 0): each expert takes at most `capacity` of this rank's rows; the others
// are dropped (send_pos -1, not counted). By position: the first rows in t*K + k order are kept.
// Otherwise by probability: the rows with the largest p [T*K] are kept, ties to the lower t*K + k.
// p may be nullptr when capacity == 0 or drop_by_position.
void dispatch_layout(const int32_t* idx, const float* p, int64_t T, int64_t K, int64_t E,
                     int64_t capacity, bool drop_by_position, int32_t* expert_counts,
                     int32_t* send_pos);

}  // namespace moe::cpu
