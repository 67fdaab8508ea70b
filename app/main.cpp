// moebench: a distributed MoE layer training step benchmark. Launched under mpirun (one process
// per GPU) or as a single process. main only parses the command line, initialises MPI and turns
// errors into one message and a non-zero exit on every rank.
#include <mpi.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "app/catalog.h"
#include "app/cli.h"
#include "app/compare_command.h"
#include "app/dispatch_command.h"
#include "app/gemm_command.h"
#include "app/run_command.h"
#include "core/error.h"
#include "core/workload.h"

int main(int argc, char** argv) {
  // Help, --version and usage errors are answered before MPI starts: they do no work, and leave
  // no MPI session directory behind. Every rank of a launched job parses the same arguments, so
  // every rank exits here; the launcher's rank 0 prints.
  const int launched_rank = moe::launcher_rank();

  CLI::App app{"moebench: a distributed Mixture-of-Experts layer training-step benchmark"};
  app.require_subcommand(1);
  app.set_version_flag("--version", moe::version_text,
                       "print version, commit and library versions");
  moe::RunOptions opt;
  std::string log_level = "info";
  CLI::App* run = app.add_subcommand("run", "run a workload: warm-up, timed steps, check, report");
  run->add_option("-c,--config", opt.config,
                  "workload JSON, or a committed workload's name (`moebench list`)")
      ->required();
  run->add_option("--set", opt.sets, "override a workload key: --set mesh.ep=2 (repeatable)")
      ->take_all();
  run->add_option("--backend", opt.backend, "auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  run->add_option("-o,--out", opt.out, "write the result JSON here (atomically)");
  run->add_option("--dump", opt.dump, "dump the checked step's tensors to DIR/rank<R>/");
  // Ranges with readable bounds (CLI11's PositiveNumber prints DBL_MAX in full); the step counts'
  // bounds are the workload keys' (core/workload.h), checked again there.
  run->add_option("--dump-limit-mib", opt.dump_limit_mib, "refuse dumps above this per rank")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30))
      ->capture_default_str();
  run->add_option("--steps", opt.steps, "timed steps (default: the workload's `steps`)")
      ->check(CLI::Range(int64_t(1), moe::kMaxSteps));
  run->add_option("--warmup", opt.warmup, "warm-up steps (default: the workload's `warmup`)")
      ->check(CLI::Range(int64_t(0), moe::kMaxSteps));
  run->add_option("--timeout-s", opt.timeout_s,
                  "seconds a rank waits on its peers before aborting the job")
      ->check(moe::finite_range(0.001, 604800.0))
      ->capture_default_str();
  run->add_flag("-q,--quiet", opt.quiet,
                "log errors only: the report (and the plan of --dry-run) still prints");
  run->add_flag("--profile", opt.profile,
                "cudaProfilerStart/Stop around the timed steps only (nsys "
                "--capture-range=cudaProfilerApi, ncu --profile-from-start off)");
  run->add_flag("--dry-run", opt.dry_run,
                "print the resolved mesh, GEMM shapes, FLOPs, all-to-all bytes and memory "
                "estimates, with warnings where it will not fit this host or its shapes waste "
                "the hardware, and exit without running");
  run->add_option("--world", opt.world,
                  "with --dry-run: plan for this many ranks (default: the launched world's)")
      ->check(CLI::Range(1, 1 << 20));
  run->add_flag("--json", opt.json, "with --dry-run: print the plan as one JSON object on stdout");
  CLI::Option* log_level_opt =
      run->add_option("--log-level", log_level, "trace | debug | info | warn | error")
          ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
          ->capture_default_str();
  run->footer(
      "Examples:\n"
      "  mpirun -np 4 moebench run --config configs/quickstart.json --set mesh.ep=2 --out r.json\n"
      "  moebench run --config configs/bench/deepseek_v3.json --dry-run --world 8 --backend cuda\n"
      "Every workload key: moebench keys; every option: docs/usage.md");
  moe::CompareOptions compare_opt;
  CLI::App* compare = moe::add_compare_subcommand(app, compare_opt);
  moe::GemmBenchOptions gemm_opt;
  CLI::App* gemm = moe::add_gemm_subcommand(app, gemm_opt);
  moe::DispatchBenchOptions dispatch_opt;
  CLI::App* dispatch = moe::add_dispatch_subcommand(app, dispatch_opt);
  CLI::App* keys = app.add_subcommand(
      "keys", "print every workload key (type, default, meaning) as a Markdown table");
  CLI::App* list = app.add_subcommand(
      "list",
      "print the committed workloads (configs/) with their shapes, by the name --config takes");

  std::vector<std::string> subcommands;  // as registered above: one list to keep
  for (const CLI::App* sub : app.get_subcommands({})) subcommands.push_back(sub->get_name());
  if (const std::string typo = moe::unknown_subcommand_message(argc, argv, subcommands);
      !typo.empty()) {
    if (launched_rank == 0) std::fprintf(stderr, "moebench: %s\n", typo.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = launched_rank == 0 ? app.exit(e) : e.get_exit_code();
    return rc == 0 ? 0 : 2;
  }

  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  moe::setup_logging(rank);
  // -q leaves the errors; a --log-level given beside it wins.
  if (opt.quiet && log_level_opt->count() == 0) log_level = "error";
  spdlog::set_level(spdlog::level::from_str(log_level));
  if (rank != 0 && log_level == "info") spdlog::set_level(spdlog::level::warn);
  for (int i = 0; i < argc; ++i) opt.command_line += (i ? " " : "") + std::string(argv[i]);
  dispatch_opt.command_line = opt.command_line;
  gemm_opt.command_line = opt.command_line;

  int rc = 0;
  try {
    if (keys->parsed()) {
      if (rank == 0) std::fputs(moe::workload_keys_markdown().c_str(), stdout);
    } else if (dispatch->parsed()) {
      rc = moe::dispatch_command(dispatch_opt);
    } else if (gemm->parsed()) {
      rc = rank == 0 ? moe::gemm_command(gemm_opt) : 0;
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
