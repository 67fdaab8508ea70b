#pragma once
// The committed workloads (configs/**/*.json in the source tree): `moebench list` prints them and
// `run --config NAME` finds one by name, so that a run need not spell out the source tree's path.
#include <string>
#include <vector>

namespace moe {

// The source tree's configs/ (MOE_SOURCE_DIR, fixed when the program was built).
std::string committed_configs_dir();

struct CommittedWorkload {
  std::string name;  // its path under configs/ without ".json": "bench/deepseek_v3", "tiny"
  std::string path;
};

// Every configs/**/*.json under dir, sorted by name; none where dir does not exist.
std::vector<CommittedWorkload> committed_workloads(const std::string& dir);

// --config's argument as a file to load: a path that exists as it is; otherwise the committed
// workload of that name (".json" and a leading "configs/" may be written), or the only one whose
// name ends in it ("deepseek_v3" for "models/deepseek_v3" when no other one ends so). Throws
// UserError naming the candidates where several match, and every committed name where none does.
std::string resolve_config(const std::string& arg, const std::string& dir);

// `moebench list`: one row per committed workload with its shape (hidden, ffn, experts, topk,
// tokens_per_rank) and its `name` key; a file that does not load says why in its row.
std::string committed_workloads_table(const std::string& dir);

}  // namespace moe
