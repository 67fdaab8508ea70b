#pragma once
// `moebench run --dry-run`: what a workload would do on a world of ranks, without running it:
// the resolved mesh, each rank's experts and GEMM shapes, FLOPs and all-to-all bytes per step,
// and the memory estimates the run would check (for planning a sweep on a machine without the
// GPUs).
#include <string>

#include "core/workload.h"

namespace moe {

// Prints the plan of `w` (already resolved and validated for `world` ranks) for `backend`
// ("cpu" or "cuda", which need not be present) to stdout.
void print_dry_run(const Workload& w, int world, const std::string& backend);

}  // namespace moe
