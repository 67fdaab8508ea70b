#pragma once
// --dump DIR: the checked step's exact tensors, per rank, as .npy + meta.json, so that numpy or
// PyTorch can verify a run independently (scripts/verify_dump.py does).
#include <cstdint>
#include <string>

#include "core/mesh.h"
#include "core/moe_layer.h"
#include "core/workload.h"

namespace moe {

// Bytes one rank's dump takes (known up front, so a too-large dump is refused before the run).
int64_t dump_bytes_per_rank(const Workload& w, const Mesh& mesh);
// Throws a UserError naming --dump and the fix unless dir is new or an empty directory: a
// dump never mixes with another run's rank folders. Before any work.
void check_dump_target(const std::string& dir);

void write_dump(const std::string& dir, const Workload& w, const Mesh& mesh, const StepOutputs& o);

}  // namespace moe
