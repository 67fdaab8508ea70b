#pragma once
// `moebench dispatch`: the dispatchers alone, as DeepEP's and nccl-tests' bandwidth tests run
// them: for each dispatcher and tokens-per-rank count, its layout and four directions timed on
// the workload's routing and mesh, with the bytes each sends to the other EP ranks, its bus
// bandwidth, and the EP group's equal-split all-to-all at the same bytes beside it
// (app/dispatch_bench.h). Both backends; launched like `run`.
#include <cstdint>
#include <string>
#include <vector>

#include "core/bounded_wait.h"

namespace CLI {
class App;
}

namespace moe {

struct DispatchBenchOptions {
  std::string config;
  std::vector<std::string> sets;
  std::string backend = "auto";
  std::vector<int64_t> tokens;           // empty: the workload's tokens_per_rank
  std::vector<std::string> dispatchers;  // empty: every value of the `dispatch` key
  int iters = 20, warmup = 5;
  std::string out;  // result JSON (atomically), optional
  double timeout_s = kDefaultWaitBoundS;
  std::string command_line;
};

CLI::App* add_dispatch_subcommand(CLI::App& app, DispatchBenchOptions& opt);

// Exit status: 0 measured, 2 bad input (on every rank); 3 and 4 come from aborts.
int dispatch_command(const DispatchBenchOptions& opt);

}  // namespace moe
