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

// slots [n] int32 = slot_of[idx[i]]: routed experts as the slots expert_placement put them in
// (core/placement.h), the ids every dispatcher takes; slot_of [E] is a permutation of [0, E).
void experts_to_slots(const int32_t* idx, int64_t n, const int32_t* slot_of, int32_t* slots);

// The all-gather dispatcher's layout on one EP rank: pos [sources * rows_per_source] int32 =
// where each routed row of every source rank (its send positions send_pos, one source after
// another) sits in this rank's expert-major buffer, -1 where the row goes to another rank's
// experts or was dropped. starts [sources, E_local + 1]: where this rank's local expert l's rows
// begin in source s's send order ([s, E_local]: where this rank's rows end); dest
// [sources, E_local]: where block (s, l) begins in expert-major order (core/layout.h
// gathered_layout). A row keeps its rank inside its (source, expert) block.
void expert_major_positions(const int32_t* send_pos, const int32_t* starts, const int32_t* dest,
                            int64_t sources, int64_t rows_per_source, int64_t E_local,
                            int32_t* pos);

// The deduplicated dispatcher's send plan on one source rank (dispatch/alltoall_dedup.h): one
// wire row per (token t, EP rank r) where r's experts take at least one of t's kept rows
// (send_pos >= 0), ordered by rank, then token; EP rank r holds experts [r*E/ep, (r+1)*E/ep).
// wire_pos [T, ep]: the wire row of (t, r), -1 where none; wire_counts [ep]: wire rows per rank.
// For wire row (t, r) and each k, slots [W, K] = send_pos[t*K + k] less the send positions of
// the ranks before r (the row's place among what the all-to-all would send r, so that r finds
// its local expert and its place inside that expert's block), -1 where (t, k) was dropped or goes
// to another rank; weights [W, K] = p[t, k] where the slot is not -1, else 0. W =
// sum(wire_counts) <= T * min(K, ep); expert_counts [E] and send_pos [T*K] are dispatch_layout's.
void dedup_layout(const int32_t* idx, const float* p, const int32_t* expert_counts,
                  const int32_t* send_pos, int64_t T, int64_t K, int64_t E, int64_t ep,
                  int32_t* wire_pos, int32_t* wire_counts, int32_t* slots, float* weights);

}  // namespace moe::cpu
