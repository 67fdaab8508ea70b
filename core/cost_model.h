#pragma once
// The cost model: what each phase of a step must compute and move, from the shapes alone. The run
// (rate columns and roofline floors), --dry-run (the plan) and the report's model FLOPs all read
// it, so a formula changes in one place.
#include <cstddef>
#include <vector>

#include "core/mesh.h"
#include "core/moe_layer.h"
#include "core/workload.h"

namespace moe {

struct PhaseCost {
  double flops = 0;       // per step, whole world (0 for communication-only phases)
  double bytes = 0;       // per step, per rank, through its collective (0: none)
  double bus_factor = 0;  // busbw = algbw * bus_factor (nccl-tests conventions)
  // Per step, per rank: device-memory bytes the phase must read and write at the least (the
  // experts: weights, weight gradients, the rows in and out); 0 where not modelled.
  double mem_bytes = 0;
  // Its GEMMs run in FP8 (an FP8 precision's expert and shared-expert phases): its compute floor
  // takes the calibrated FP8 rate.
  bool fp8 = false;
};

// Expert weight elements a rank's step holds and multiplies: its local routed experts' w_in and
// w_out (3 H F each), and the shared experts' (3 H F_sh in all, on every rank). What the FSDP
// gather moves, and what an FP8 step quantizes anew.
double routed_weight_elems(const Workload& w, const Mesh& m);
double shared_weight_elems(const ModelShape& m);

// Costs per Phase (core/moe_layer.h), [kNumPhases]. rows_kept: (t, k) rows the experts process
// per step over the world (N*K less capacity drops; align padding is not useful work);
// storage_bytes, grad_bytes: per element of storage and of the expert weight gradients.
std::vector<PhaseCost> phase_costs(const Workload& w, const Mesh& m, size_t storage_bytes,
                                   size_t grad_bytes, double rows_kept);

// The model FLOPs of one step, fwd + bwd: 18 HF per routed row kept by the experts, 18 H F_sh per
// token and shared expert, 6 HE per token for the router (the result's flops_formula).
double model_flops_per_step(const ModelShape& m, double tokens, double rows_kept);
// S x F_sh, the shared experts' total width (0 without them).
double shared_width(const ModelShape& m);
extern const char* const kModelFlopsFormula;

}  // namespace moe
