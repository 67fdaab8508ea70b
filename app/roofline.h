#pragma once
// Floors: the least time each phase could take on this machine, from the calibration
// (app/calibrate.h), so that the report can give every phase's time and the step's as a fraction
// of what the hardware allows.
#include <vector>

#include "app/calibrate.h"
#include "app/run_result.h"

namespace moe {

// Sets floor_ms on the phases that have one and returns the step's floor, the sum over the
// phases that partition the step (of phases run beside another, the larger of their floors'
// sum and the other's):
// - a phase with FLOPs: its FLOPs per rank (flops / world) at the calibrated dense GEMM rate, or
//   its memory bytes (mem_bytes) at the calibrated memory bandwidth where that takes longer
//   (the experts at EP 1 on DeepSeek-V3: 256 experts' weights and fp32 gradients per step);
// - an a2a_* phase: its bytes per rank at the calibrated all-to-all algbw (none at ep 1);
// - dispatch_fwd, combine_fwd, combine_bwd, dispatch_bwd: the floor of their a2a_* part;
// - fsdp_gather, layout (and counts_exchange), grad_sync: none (0).
// floor_bound names which of compute, memory or network set each floor.
// Returns 0 and sets nothing when the calibration was not done.
double apply_floors(const Calibration& c, int world, std::vector<PhaseResult>& phases);

}  // namespace moe
