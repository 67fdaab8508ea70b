#pragma once
// `moebench run`: workload -> mesh -> backend -> warm-up and timed steps -> check -> report.
#include <cstdint>
#include <string>
#include <vector>

#include "core/bounded_wait.h"

namespace moe {

struct RunOptions {
  std::string config;
  std::vector<std::string> sets;          // "--set key.path=value", applied in order
  std::string backend = "auto";           // auto | cpu | cuda
  std::string out;                        // result JSON path ("" = none)
  std::string dump;                       // dump directory ("" = none)
  int64_t dump_limit_mib = 256;           // per rank
  int64_t steps = -1, warmup = -1;        // -1: from the workload
  double timeout_s = kDefaultWaitBoundS;  // a rank waiting longer on its peers aborts the job
  bool quiet = false;
  bool dry_run = false;  // print the plan (app/dry_run.h) and exit
  int world = 0;         // --dry-run only: plan for this many ranks (0: the MPI world's size)
  bool json = false;     // --dry-run only: the plan as one JSON object
  std::string command_line;
};

// Exit status: 0 ran and the check passed (or was off), 1 the check failed, 2 bad input (3 and
// 4 come from aborts: an internal error, a wait past --timeout-s).
int run_command(const RunOptions& opt);

}  // namespace moe
