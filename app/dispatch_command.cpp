#include "app/dispatch_command.h"

#include <mpi.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/all_ranks.h"
#include "app/backend.h"
#include "app/catalog.h"
#include "app/cli.h"
#include "app/dispatch_bench.h"
#include "app/report.h"
#include "core/error.h"
#include "core/grouped_gemm.h"
#include "core/mesh.h"
#include "core/routing_modes.h"

namespace moe {

CLI::App* add_dispatch_subcommand(CLI::App& app, DispatchBenchOptions& opt) {
  CLI::App* s = app.add_subcommand(
      "dispatch",
      "the dispatchers alone: each direction's time, bytes to other ranks and bus bandwidth, "
      "beside an all-to-all of equal bytes");
  s->add_option("-c,--config", opt.config,
                "workload JSON, or a committed workload's name (`moebench list`)")
      ->required();
  s->add_option("--set", opt.sets, "override a workload key: --set mesh.ep=2 (repeatable)")
      ->take_all();
  s->add_option("--backend", opt.backend, "auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  s->add_option("--tokens", opt.tokens,
                "tokens per rank to measure at, comma-separated (default: tokens_per_rank)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  s->add_option("--dispatchers", opt.dispatchers,
                "values of the dispatch key to measure, comma-separated (default: all)")
      ->delimiter(',');
  s->add_option("--iters", opt.iters, "timed iterations per dispatcher and size (median reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  s->add_option("--warmup", opt.warmup, "untimed iterations first")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  s->add_option("-o,--out", opt.out, "write the figures as JSON here (atomically)");
  s->add_option("--timeout-s", opt.timeout_s,
                "seconds a rank waits on its peers before aborting the job")
      ->check(finite_range(0.001, 604800.0))
      ->capture_default_str();
  s->footer(
      "Examples:\n"
      "  mpirun -np 2 moebench dispatch --config bench/deepseek_v3 --set mesh.ep=2 \\\n"
      "      --tokens 1024,2048,4096 --out dispatch.json\n"
      "  mpirun -np 8 moebench dispatch --config bench/qwen3_30b_a3b --set mesh.ep=8 \\\n"
      "      --dispatchers alltoall_dedup,allgather\n"
      "The step's schedule keys (overlap, overlap_chunks) do not apply: each dispatcher runs over\n"
      "all tokens of the rank. docs/usage.md, \"moebench dispatch\".");
  return s;
}

namespace {

using nlohmann::json;

// The workload one measurement runs: the dispatcher and token count set, the pipeline off (a
// dispatcher runs over all of the rank's tokens), resolved and validated for the world.
Workload measured_workload(const Workload& base, const std::string& dispatcher, int64_t tokens,
                           int world_size) {
  Workload w = base;
  apply_override(w, "dispatch=" + dispatcher);
  apply_override(w, "tokens_per_rank=" + std::to_string(tokens));
  w.overlap = Overlap::kNone;
  w.overlap_chunks = Workload().overlap_chunks;
  // graph true's warm-up captures the step; the bench captures nothing, so the step's count of
  // warm-up steps must not refuse it.
  w.warmup = std::max<int64_t>(w.warmup, 2);
  resolve_and_validate(w, world_size);
  return w;
}

std::string routing_text(const Workload& w) {
  std::string s = "routing " + std::string(name_of(w.routing.mode)) +
                  (routing_is_forced(w) ? "" : " (the seeded gate's first step)");
  return s + (w.capacity_factor > 0 ? ", capacity_factor " + std::to_string(w.capacity_factor)
                                    : ", dropless");
}

void print_header(const Workload& w, const Mesh& mesh, const std::string& backend,
                  const Backend& be, const DispatchBenchOptions& opt) {
  const auto device = be.info.find("device");
  std::printf(
      "# moebench dispatch: %s, H %lld, E %lld, K %lld, dtype %s, dispatch_dtype %s, "
      "align %lld; %s\n",
      w.name.c_str(), (long long)w.model.hidden, (long long)w.model.experts,
      (long long)w.model.topk, name_of(w.dtype), name_of(w.dispatch_dtype), (long long)w.align,
      routing_text(w).c_str());
  std::printf(
      "# mesh %d rank%s = ep %d x fsdp %d, backend %s%s; median of %d iterations after %d, "
      "slowest rank\n",
      mesh.world, mesh.world == 1 ? "" : "s", mesh.ep, mesh.fsdp, backend.c_str(),
      device == be.info.end() ? "" : (" (" + device->second + ")").c_str(), opt.iters, opt.warmup);
  std::printf(
      "# ms: the whole direction; wire ms: its collective (layout: the counts "
      "exchange); MiB sent: to other EP ranks, per rank; busbw: MiB sent / wire ms; a2a: "
      "the EP group's equal-split all-to-all sending the same bytes; p2p (nvlink): plain "
      "copies of the same bytes into the other ranks' memory (copy engines on GPUs)\n");
  std::printf("# %-14s %7s  %-12s %9s %9s %10s %10s %9s %9s %9s\n", "dispatcher", "tokens", "part",
              "ms", "wire ms", "MiB sent", "busbw GB/s", "a2a ms", "a2a GB/s", "p2p GB/s");
}

void print_result(const DispatchBenchResult& r, int ep) {
  std::printf("  %-14s %7lld  %-12s %9.3f %9.3f", r.dispatcher.c_str(), (long long)r.tokens,
              "layout", r.layout_ms, r.counts_ms);
  if (ep > 1) std::printf("   (%.2f rows per token to other ranks)", r.rows_per_token);
  if (r.tile_rows_over_rows > 0)
    std::printf("   (in %d-row tiles the experts' rows take %.2fx their count)", kGroupedTileRows,
                r.tile_rows_over_rows);
  std::printf("\n");
  for (int dir = 0; dir < kNumDirs; ++dir) {
    const DispatchBenchDirection& o = r.dirs[dir];
    std::printf("  %-14s %7lld  %-12s %9.3f %9.3f", r.dispatcher.c_str(), (long long)r.tokens,
                direction_name(dir), o.ms, o.wire_ms);
    if (o.bytes_to_others > 0)
      std::printf(" %10.3f %10.1f %9.3f %9.1f", o.bytes_to_others / 1048576.0, o.busbw_gbps,
                  o.alltoall_ms, o.alltoall_busbw_gbps);
    if (o.peer_copy_ms > 0) std::printf(" %9.1f", o.peer_copy_gbps);
    std::printf("\n");
  }
  std::fflush(stdout);
}

json result_json(const DispatchBenchResult& r) {
  json dirs = json::object();
  for (int dir = 0; dir < kNumDirs; ++dir) {
    const DispatchBenchDirection& o = r.dirs[dir];
    dirs[direction_name(dir)] = {{"ms", o.ms},
                                 {"wire_ms", o.wire_ms},
                                 {"bytes_to_others", o.bytes_to_others},
                                 {"busbw_gbps", o.busbw_gbps},
                                 {"alltoall_ms", o.alltoall_ms},
                                 {"alltoall_busbw_gbps", o.alltoall_busbw_gbps}};
    if (o.peer_copy_ms > 0) {
      dirs[direction_name(dir)]["peer_copy_ms"] = o.peer_copy_ms;
      dirs[direction_name(dir)]["peer_copy_gbps"] = o.peer_copy_gbps;
    }
  }
  return {{"dispatcher", r.dispatcher},
          {"tokens_per_rank", r.tokens},
          {"layout_ms", r.layout_ms},
          {"counts_exchange_ms", r.counts_ms},
          {"rows_per_token", r.rows_per_token},
          {"directions", dirs},
          {"tile_rows", tile_rows_json(r.tile_rows_over_rows)}};
}

int run_dispatch_bench(const DispatchBenchOptions& opt) {
  MPI_Comm world = MPI_COMM_WORLD;
  int rank = 0, world_size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &world_size);

  Workload base;
  std::vector<std::string> dispatchers = opt.dispatchers;
  std::vector<int64_t> tokens = opt.tokens;
  std::string backend;
  Mesh mesh;
  // Every measurement's workload is validated before anything runs: a bad dispatcher name or a
  // token count the workload refuses costs no set-up, and fails on every rank.
  std::vector<std::vector<Workload>> runs;  // [tokens][dispatcher]
  std::vector<std::string> skipped;         // why a dispatcher was left out
  const bool ok = on_all_ranks(world, opt.timeout_s, [&] {
    check_git_commit_env();
    base = load_workload_file(resolve_config(opt.config, committed_configs_dir()));
    for (const std::string& s : opt.sets) apply_override(base, s);
    // Named dispatchers must all run; by default, those the workload refuses (graph true takes
    // allgather only at ep > 1) are left out with the reason.
    const bool named = !dispatchers.empty();
    if (!named) dispatchers = dispatcher_names();
    if (tokens.empty()) tokens = {base.tokens_per_rank};
    for (int64_t t : tokens) {
      runs.emplace_back();
      std::string refused;
      for (const std::string& d : dispatchers) {
        try {
          runs.back().push_back(measured_workload(base, d, t, world_size));
        } catch (const UserError& e) {
          const std::string why =
              "dispatcher " + d + " at " + std::to_string(t) + " tokens per rank: " + e.what();
          if (named) throw UserError("moebench dispatch, " + why);
          skipped.push_back(why);
          refused += "; " + why;
        }
      }
      MOE_USER_CHECK(!runs.back().empty(),
                     "moebench dispatch: the workload refuses every dispatcher" << refused);
    }
    const Workload& first = runs.front().front();
    backend = resolve_backend(opt.backend);
    for (const auto& row : runs)
      for (const Workload& w : row) check_backend_supports(backend, w);
    mesh = make_mesh(world_size, rank, first.mesh.ep, first.mesh.fsdp, first.model.experts);
    if (!opt.out.empty()) check_json_target(opt.out);
  });
  if (!ok) return 2;

  const Workload& first = runs.front().front();
  Backend be = make_backend(backend, world, mesh, first, opt.timeout_s);
  if (rank == 0) {
    for (const std::string& why : skipped) spdlog::warn("left out: {}", why);
    print_header(first, mesh, backend, be, opt);
  }
  json results = json::array();
  for (const auto& row : runs) {
    for (const Workload& w : row) {
      const DispatchBenchResult r = bench_dispatcher(w, mesh, *be.device, *be.ops, *be.comm, world,
                                                     opt.warmup, opt.iters, opt.timeout_s);
      if (rank == 0) print_result(r, mesh.ep);
      results.push_back(result_json(r));
    }
  }
  if (rank == 0 && !opt.out.empty()) {
    RunResult about;
    about.backend = backend;
    about.backend_info = be.info;
    about.command_line = opt.command_line;
    about.places = be.places;
    // The workload as given, its mesh resolved; each result names its dispatcher and tokens.
    Workload shown = base;
    shown.mesh.ep = mesh.ep;
    shown.mesh.fsdp = mesh.fsdp;
    json config = workload_to_json(shown);
    config.erase("dispatch");
    config.erase("tokens_per_rank");
    const json j = {{"command", "dispatch"},
                    {"config", config},
                    {"mesh", {{"world", mesh.world}, {"ep", mesh.ep}, {"fsdp", mesh.fsdp}}},
                    {"iters", opt.iters},
                    {"warmup", opt.warmup},
                    {"results", results},
                    {"provenance", provenance(about)}};
    write_json_atomically(opt.out, j);
  }
  return 0;
}

}  // namespace

int dispatch_command(const DispatchBenchOptions& opt) {
  try {
    return run_dispatch_bench(opt);
  } catch (const UserError& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
}

}  // namespace moe
