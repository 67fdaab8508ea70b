#pragma once
// Which EP rank holds which expert. Contiguous placement gives EP rank r the experts [r * E_local,
// (r + 1) * E_local); balanced placement (DeepSeek's EPLB without replicas) deals the experts out
// by their loads so that every rank receives about the same rows, since a collective waits for
// the rank with the most. Either way each rank holds E_local experts, in its slots 0..E_local-1 in
// ascending expert order: slot s of EP rank r is global slot r * E_local + s.
#include <cstdint>
#include <vector>

#include "core/workload.h"

namespace moe {

struct Placement {
  std::vector<int32_t> expert_of_slot;  // [E]: the expert in global slot g
  std::vector<int32_t> slot_of_expert;  // [E]: the inverse
};

// Whether w's placement may move experts off their contiguous ranks (balanced, at mesh.ep > 1).
bool places_experts(const Workload& w);

Placement contiguous_placement(int64_t experts);

// Largest load first, each to the rank with the least load so far among those with a free slot
// (the lowest rank at a tie; equal loads keep expert order), then every rank's experts in
// ascending order. Deterministic: every rank computes the same placement from the same loads.
Placement balanced_placement(const std::vector<double>& load, int64_t ep);

// The placement w asks for from the world's rows per expert, counts [E] (the first step's, as the
// router's all-reduced statistics hold them), with the rows per EP rank, max over mean, as
// contiguous placement would have them and as placed (both 0 where w places nothing).
struct PlacedExperts {
  Placement placement;
  double contiguous_load = 0, placed_load = 0;
};
PlacedExperts place_by_counts(const Workload& w, const float* counts);

// The rows each EP rank would receive under a placement: the loads of its experts summed.
std::vector<double> rank_loads(const Placement& p, const std::vector<double>& load, int64_t ep);
// max / mean of rank_loads (1 for an even split; 1 where nothing is routed).
double rank_load_max_over_mean(const Placement& p, const std::vector<double>& load, int64_t ep);

}  // namespace moe
