#pragma once
// `moebench run`: workload -> mesh -> backend -> warm-up and timed steps -> check -> report.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "app/backend.h"
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
  bool profile = false;  // cudaProfilerStart/Stop around the timed steps
  bool dry_run = false;  // print the plan (app/dry_run.h) and exit
  int world = 0;         // --dry-run only: plan for this many ranks (0: the MPI world's size)
  bool json = false;     // --dry-run only: the plan as one JSON object
  std::string command_line;
};

// Exit status: 0 ran and the check passed (or was off), 1 the check failed, 2 bad input (3 and
// 4 come from aborts: an internal error, a wait past --timeout-s).
int run_command(const RunOptions& opt);

// The same over the backend `make` builds (make_backend's arguments): tests put a recording
// device over the CPU backend's to see what the run asks of it.
using BackendFactory =
    std::function<Backend(const std::string& name, MPI_Comm world, const Mesh& mesh,
                          const Workload& w, double timeout_s)>;
int run_command(const RunOptions& opt, const BackendFactory& make);

}  // namespace moe
