// moebench: a distributed MoE layer training step benchmark. Launched under mpirun (one process
// per GPU) or as a single process. main only initialises MPI, parses the command line and turns
// errors into one message and a non-zero exit on every rank.
#include <mpi.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "app/catalog.h"
#include "app/compare_command.h"
#include "app/run_command.h"
#include "core/error.h"
#include "core/workload.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  spdlog::set_pattern(rank == 0 ? "[%H:%M:%S] %^%l%$: %v"
                                : "[%H:%M:%S] rank " + std::to_string(rank) + " %^%l%$: %v");

  CLI::App app{"moebench: a distributed Mixture-of-Experts layer training-step benchmark"};
  app.require_subcommand(1);
  moe::RunOptions opt;
  std::string log_level = "info";
  CLI::App* run = app.add_subcommand("run", "run a workload: warm-up, timed steps, check, report");
  run->add_option("-c,--config", opt.config,
                  "workload JSON, or a committed workload's name (`moebench list`)")
      ->required();
  run->add_option("--set", opt.sets, "override a workload key: --set mesh.ep=2 (repeatable)")
      ->take_all();
  run->add_option("--backend", opt.backend, "auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  run->add_option("-o,--out", opt.out, "write the result JSON here (atomically)");
  run->add_option("--dump", opt.dump, "dump the checked step's tensors to DIR/rank<R>/");
  // Ranges with readable bounds (CLI11's PositiveNumber prints DBL_MAX in full); the step counts'
  // bounds are the workload keys' (core/workload.h), checked again there.
  run->add_option("--dump-limit-mib", opt.dump_limit_mib, "refuse dumps above this per rank")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  run->add_option("--steps", opt.steps, "timed steps (overrides the workload)")
      ->check(CLI::Range(int64_t(1), moe::kMaxSteps));
  run->add_option("--warmup", opt.warmup, "warm-up steps (overrides the workload)")
      ->check(CLI::Range(int64_t(0), moe::kMaxSteps));
  run->add_option("--timeout-s", opt.timeout_s,
                  "seconds a rank waits on its peers before aborting the job")
      ->check(CLI::Range(0.001, 604800.0));
  run->add_flag("-q,--quiet", opt.quiet, "no progress lines");
  run->add_flag("--profile", opt.profile,
                "cudaProfilerStart/Stop around the timed steps only (nsys "
                "--capture-range=cudaProfilerApi, ncu --profile-from-start off)");
  run->add_flag("--dry-run", opt.dry_run,
                "print the resolved mesh, GEMM shapes, FLOPs, all-to-all bytes and memory "
                "estimates, and exit without running");
  run->add_option("--world", opt.world, "with --dry-run: plan for this many ranks")
      ->check(CLI::Range(1, 1 << 20));
  run->add_option("--log-level", log_level, "trace | debug | info | warn | error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  moe::CompareOptions compare_opt;
  CLI::App* compare = moe::add_compare_subcommand(app, compare_opt);
  CLI::App* keys = app.add_subcommand(
      "keys", "print every workload key (type, default, meaning) as a Markdown table");
  CLI::App* list = app.add_subcommand(
      "list",
      "print the committed workloads (configs/) with their shapes, by the name --config takes");

  int rc = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same arguments, so every rank exits here; rank 0 prints.
    rc = rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
    if (rc != 0) rc = 2;
    MPI_Finalize();
    return rc;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  if (rank != 0 && log_level == "info") spdlog::set_level(spdlog::level::warn);
  for (int i = 0; i < argc; ++i) opt.command_line += (i ? " " : "") + std::string(argv[i]);

  try {
    if (keys->parsed()) {
      if (rank == 0) std::fputs(moe::workload_keys_markdown().c_str(), stdout);
    } else if (list->parsed()) {
      if (rank == 0)
        std::fputs(moe::committed_workloads_table(moe::committed_configs_dir()).c_str(), stdout);
    } else {
      rc = compare->parsed() ? moe::compare_command(compare_opt) : moe::run_command(opt);
    }
  } catch (const std::exception& e) {
    // An error on one rank mid-step: the others may be inside a collective, so abort the world
    // rather than leave them waiting.
    spdlog::error("{}", e.what());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Finalize();
  return rc;
}
