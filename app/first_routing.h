#pragma once
// The routing of a run's first step for one rank's tokens, on either backend: the seeded gate over
// the seeded tokens (or the forced routing.mode's experts), as `run` routes them, so that the
// benches' rows are the step's rows.
#include <cstdint>
#include <vector>

#include "core/buffer_plan.h"
#include "core/device.h"
#include "core/ops.h"
#include "core/workload.h"
#include "dispatch/owned_buffers.h"

namespace moe {

// Device buffers, owned by the OwnedBuffers they were taken from.
struct FirstRouting {
  void* x = nullptr;       // [T, H] storage: world rank `rank`'s tokens of step 0
  int32_t* idx = nullptr;  // [T, K] their experts
  float* p = nullptr;      // [T, K] their weights
  // [2E + 1] the router's statistics of these tokens: [0, E) rows per expert
  float* stats = nullptr;
};
FirstRouting route_first_step(const Workload& w, const Dims& d, int rank, const BufferPlan& plan,
                              Device& device, Ops& ops, OwnedBuffers& b);

// Rows each expert gets from each of world ranks [0, ep)'s tokens in step 0 (before any
// capacity): [source rank][expert]. The tokens an EP group of ep ranks dispatches among itself.
std::vector<std::vector<float>> first_step_counts_by_source(const Workload& w, int64_t ep,
                                                            Device& device, Ops& ops);

}  // namespace moe
