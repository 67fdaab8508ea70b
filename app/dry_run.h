#pragma once
// `moebench run --dry-run`: what a workload would do on a world of ranks, without running it:
// the resolved mesh, each rank's experts and GEMM shapes, FLOPs and all-to-all bytes per step,
// the memory estimates the run would check, and warnings where the plan will not fit this host
// or its shapes waste the hardware (for planning a sweep on a machine without the GPUs).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/workload.h"

namespace moe {

// The host a plan is made on, for its memory warning: its memory, and how many of the plan's
// ranks would share it (--world N: all N; under mpirun: the launched ranks on this host).
struct PlanHost {
  int64_t memory_bytes = 0;  // 0: unknown (no warning)
  int ranks = 1;
  int64_t gpu_memory_bytes = 0;  // one visible GPU's memory, for a cuda plan (0: none seen)
};

// The plan of `w` (already resolved and validated for `world` ranks) for `backend` ("cpu" or
// "cuda", which need not be present) as one JSON object: mesh, routing, GEMM shapes, FLOPs, bytes,
// memory and `warnings` (sentences naming the key and the fix).
nlohmann::json dry_run_plan(const Workload& w, int world, const std::string& backend,
                            const PlanHost& host);

// Prints the plan of w from dry_run_plan to stdout: as text (the warnings last, as `# warning:`
// lines), or with json as the object itself on one line.
void print_dry_run(const Workload& w, const nlohmann::json& plan, bool json);

}  // namespace moe
