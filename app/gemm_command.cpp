#include "app/gemm_command.h"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>

#include "app/backend.h"
#include "app/catalog.h"
#include "app/first_routing.h"
#include "app/gemm_totals.h"
#include "app/report.h"
#include "core/error.h"
#include "core/layout.h"
#include "core/placement.h"
#include "core/routing_modes.h"
#ifdef MOE_HAVE_CUDA
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm_bench.h"
#include "kernels/cuda/nvml_clocks.h"
#endif

namespace moe {

CLI::App* add_gemm_subcommand(CLI::App& app, GemmBenchOptions& opt) {
  CLI::App* g = app.add_subcommand(
      "gemm", "the expert GEMMs alone on a workload's shapes, per method (CUDA backend)");
  g->add_option("-c,--config", opt.config,
                "workload JSON, or a committed workload's name (`moebench list`)")
      ->required();
  g->add_option("--set", opt.sets, "override a workload key: --set align=16 (repeatable)")
      ->take_all();
  g->add_option("--ep", opt.ep, "expert-parallel size the shapes are for (default: mesh.ep, or 1)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  g->add_option("--iters", opt.iters, "timed calls per GEMM (median reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  g->add_option("--methods", opt.methods, "gemm.method values to time")
      ->capture_default_str()
      ->delimiter(',');
  g->add_option("--rows", opt.rows,
                "rows per expert: balanced (equal), or routed (the workload's first step's "
                "routing, at the EP rank with the most rows)")
      ->capture_default_str()
      ->check(CLI::IsMember({"balanced", "routed"}));
  g->add_option("-o,--out", opt.out, "write the figures as JSON here (atomically)");
  g->footer(
      "Examples:\n"
      "  moebench gemm --config bench/deepseek_v3 --ep 2 --methods grouped_sm90 --rows routed\n"
      "  moebench gemm --config bench/mixtral_8x7b --set tokens_per_rank=8192 \\\n"
      "      --set precision=fp8_tensor --set align=16 --out gemm.json\n"
      "docs/usage.md, \"moebench gemm\".");
  return g;
}

std::vector<int64_t> balanced_expert_rows(const Workload& w, int64_t ep) {
  // Every rank sends T * K rows, E / ep experts' worth to each EP rank: T * K rows arrive.
  const int64_t El = w.model.experts / ep, mine = w.tokens_per_rank * w.model.topk;
  std::vector<int64_t> rows(size_t(El), 0);
  for (int64_t l = 0; l < El; ++l) {
    const int64_t n = mine / El + (l < mine % El ? 1 : 0);
    rows[size_t(l)] = (n + w.align - 1) / w.align * w.align;
  }
  return rows;
}

RoutedExpertRows routed_expert_rows(const Workload& workload, int64_t ep,
                                    const std::vector<std::vector<float>>& counts_by_source) {
  Workload w = workload;  // one EP group of ep ranks
  w.mesh.ep = ep;
  w.mesh.fsdp = 1;
  const int64_t E = w.model.experts, El = E / ep, cap = expert_capacity(w);
  MOE_CHECK(E % ep == 0 && int64_t(counts_by_source.size()) == ep,
            "routed_expert_rows: " << E << " experts, ep " << ep << ", " << counts_by_source.size()
                                   << " sources");
  // The router's counts, before any capacity, place the experts (as in `run`); the kept rows are
  // what the GEMMs multiply.
  std::vector<float> routed(size_t(E), 0.0f);
  std::vector<double> kept(size_t(E), 0.0);
  auto kept_of = [cap](float c) { return cap > 0 ? std::min(c, float(cap)) : c; };
  for (const std::vector<float>& source : counts_by_source) {
    MOE_CHECK(int64_t(source.size()) >= E, "routed_expert_rows: a source has too few counts");
    for (int64_t e = 0; e < E; ++e) {
      routed[size_t(e)] += source[size_t(e)];
      kept[size_t(e)] += kept_of(source[size_t(e)]);
    }
  }
  const Placement placed = place_by_counts(w, routed.data()).placement;
  const std::vector<double> loads = rank_loads(placed, kept, ep);
  RoutedExpertRows best;
  // The busiest EP rank (the lowest at a tie).
  best.ep_rank = std::max_element(loads.begin(), loads.end()) - loads.begin();
  // Its experts' rows from each source, laid out as the step lays them out (core/layout.h).
  std::vector<int32_t> counts(size_t(ep * El));
  for (int64_t src = 0; src < ep; ++src)
    for (int64_t l = 0; l < El; ++l) {
      const int32_t e = placed.expert_of_slot[size_t(best.ep_rank * El + l)];
      counts[size_t(src * El + l)] = int32_t(kept_of(counts_by_source[size_t(src)][size_t(e)]));
    }
  std::vector<int64_t> offsets(size_t(El + 1));
  expert_major_offsets(counts.data(), ep, El, w.align, offsets.data());
  for (int64_t l = 0; l < El; ++l) best.rows.push_back(offsets[size_t(l + 1)] - offsets[size_t(l)]);
  return best;
}

namespace {

int run_gemm_bench(const GemmBenchOptions& opt) {
  Workload w = load_workload_file(resolve_config(opt.config, committed_configs_dir()));
  for (const std::string& s : opt.sets) apply_override(w, s);
  const int64_t ep = opt.ep > 0 ? opt.ep : (w.mesh.ep > 0 ? w.mesh.ep : 1);
  MOE_USER_CHECK(w.model.experts % ep == 0, "--ep " << ep << " does not divide model.experts "
                                                    << w.model.experts << "; pick a divisor");
  // The workload checked as `run` checks it, on the mesh of one EP group the shapes are for:
  // bad input is named before any GPU work.
  w.mesh.ep = ep;
  w.mesh.fsdp = 1;
  resolve_and_validate(w, int(ep));
  MOE_USER_CHECK(w.dtype == DType::kBf16,
                 "moebench gemm times bf16 GEMMs; set dtype=bf16 (the workload has "
                     << dtype_name(w.dtype) << ")");
  if (w.precision != Precision::kBf16)
    MOE_USER_CHECK(w.align % 16 == 0 && w.model.hidden % 16 == 0 && w.model.ffn % 16 == 0,
                   "moebench gemm with precision " << name_of(w.precision)
                                                   << " needs align, model.hidden and model.ffn "
                                                      "multiples of 16 (as the step does); set "
                                                      "align=16");
#ifndef MOE_HAVE_CUDA
  MOE_USER_CHECK(false, "moebench gemm needs the CUDA backend; this build has none");
  return 2;
#else
  try {
    resolve_backend("cuda");
  } catch (const UserError&) {
    throw UserError("moebench gemm times GPU kernels, and no GPU is visible to this process");
  }
  cuda::ExpertGemmBenchShape shape;
  shape.E_local = w.model.experts / ep;
  shape.H = w.model.hidden;
  shape.F = w.model.ffn;
  const bool routed = opt.rows == "routed";
  int64_t ep_rank = -1;
  if (routed) {
    MOE_USER_CHECK(w.capacity_factor == 0 || w.overlap != Overlap::kPipeline,
                   "moebench gemm --rows routed routes each rank's tokens at once, and overlap "
                   "pipeline caps each chunk's rows apart; set overlap=none (or capacity_factor "
                   "null) for the GEMMs' rows");
    CudaDevice device(0, w.dtype);
    CudaOps ops(device, w.gemm);
    const RoutedExpertRows r =
        routed_expert_rows(w, ep, first_step_counts_by_source(w, ep, device, ops));
    shape.rows = r.rows;
    ep_rank = r.ep_rank;
  } else {
    shape.rows = balanced_expert_rows(w, ep);
  }
  shape.grad_dtype = w.expert_grad_dtype;
  shape.sm90 = cuda::schedule_of(w.gemm);
  shape.streams = int(w.gemm.streams);
  shape.algo = cuda::algo_policy_of(w.gemm.algo);
  shape.precision = w.precision;
  // The GEMMs' clocks: calls of a few ms each, a GPU far from its steady state under a power
  // cap (a step's GEMMs run at that state's clocks: docs/output.md, "Clocks").
  std::string why_none;
  std::unique_ptr<ClockSampler> sampler = cuda::make_nvml_clock_sampler(-1, why_none);
  if (sampler) sampler->set_on(true);
  const std::vector<cuda::ExpertGemmBenchRow> rows =
      cuda::bench_expert_gemms(shape, opt.methods, opt.iters);
  const ClocksReport clocks =
      sampler ? clocks_report({summarize_clocks(sampler->finish(), sampler->power_limit_w())},
                              sampler->source(), "the GEMMs ended before a sample was taken")
              : clocks_report({}, "", why_none);
  // Each arithmetic's dense rate: an FP8 GEMM is measured against cuBLASLt's FP8 matmul in its
  // recipe, as the run's roofline does.
  std::map<Precision, double> dense_tflops;
  for (const auto& r : rows)
    if (r.gemm == "dense") dense_tflops[r.precision] = r.flops / (r.median_ms * 1e9);
  const auto [least, most] = std::minmax_element(shape.rows.begin(), shape.rows.end());
  const double mean_rows =
      double(std::accumulate(shape.rows.begin(), shape.rows.end(), int64_t(0))) /
      double(shape.rows.size());
  std::string rows_from = "balanced";
  if (routed)
    rows_from = "routed: the first step's, routing.mode " + std::string(name_of(w.routing.mode)) +
                ", at EP rank " + std::to_string(ep_rank) + ", the one with the most rows";
  std::printf(
      "# %s at ep %lld: %lld local experts x %lld-%lld rows (mean %.1f; %s), H %lld, F %lld, "
      "expert_grad_dtype %s, gemm.sm90_cluster %d, gemm.sm90_schedule %s, gemm.streams %d, "
      "gemm.algo %s, precision %s; median of %d calls\n",
      w.name.c_str(), (long long)ep, (long long)shape.E_local, (long long)*least, (long long)*most,
      mean_rows, rows_from.c_str(), (long long)shape.H, (long long)shape.F,
      dtype_name(shape.grad_dtype), shape.sm90.cluster, name_of(w.gemm.sm90_schedule),
      shape.streams, name_of(w.gemm.algo), name_of(w.precision), opt.iters);
  if (w.precision != Precision::kBf16)
    std::printf(
        "# FP8 rows: median ms and TFLOP/s include the operands' quantization (quant ms) as the "
        "step pays it (up and down also write xe's and a's transposed codes, which wgrad_in and "
        "wgrad_out take: quant 0); %%dense is the GEMM alone (median less quant) against the "
        "dense %s row\n",
        name_of(w.precision));
  std::printf("# %-10s %-24s %7s %7s %7s %10s %9s %7s %9s\n", "gemm", "method", "M", "N", "K",
              "median ms", "TFLOP/s", "%dense", "quant ms");
  // The workload as timed (its mesh already the one EP group of the shapes), and where and from
  // what it ran: what `moebench compare` checks and shows.
  RunResult about;
  about.backend = "cuda";
  about.backend_info = cuda_backend_info(0);
  about.command_line = opt.command_line;
  nlohmann::json j = {{"command", "gemm"},
                      {"config", workload_to_json(w)},
                      {"provenance", provenance(about)},
                      {"workload", w.name},
                      {"ep", ep},
                      {"experts_local", shape.E_local},
                      {"rows", shape.rows},
                      {"rows_from", routed ? "routed" : "balanced"},
                      {"routing_mode", name_of(w.routing.mode)},
                      {"ep_rank", routed ? nlohmann::json(ep_rank) : nlohmann::json(nullptr)},
                      {"iters", opt.iters},
                      {"sm90_cluster", shape.sm90.cluster},
                      {"sm90_schedule", name_of(w.gemm.sm90_schedule)},
                      {"precision", name_of(w.precision)},
                      {"gemms", nlohmann::json::array()}};
  for (const auto& r : rows) {
    const double tflops = r.flops / (r.median_ms * 1e9);
    const double pct_dense = r.flops > 0 ? 100.0 * r.flops / ((r.median_ms - r.quantize_ms) * 1e9) /
                                               dense_tflops.at(r.precision)
                                         : 0.0;
    if (r.flops > 0)
      std::printf("  %-10s %-24s %7lld %7lld %7lld %10.3f %9.1f %7.1f", r.gemm.c_str(),
                  r.method.c_str(), (long long)r.M, (long long)r.N, (long long)r.K, r.median_ms,
                  tflops, pct_dense);
    else  // FP8's weights row: quantization only
      std::printf("  %-10s %-24s %7s %7s %7s %10.3f %9s %7s", r.gemm.c_str(), r.method.c_str(), "-",
                  "-", "-", r.median_ms, "-", "-");
    if (r.quantizes)
      std::printf(" %9.3f\n", r.quantize_ms);
    else
      std::printf("\n");
    nlohmann::json row = {
        {"gemm", r.gemm},   {"method", r.method},       {"M", r.M},        {"N", r.N}, {"K", r.K},
        {"flops", r.flops}, {"median_ms", r.median_ms}, {"tflops", tflops}};
    if (r.quantizes) row["quantize_ms"] = r.quantize_ms;
    if (r.flops > 0) row["pct_dense"] = pct_dense;
    j["gemms"].push_back(row);
  }
  std::vector<GemmTime> times;
  for (const auto& r : rows)
    times.push_back({r.gemm, r.method, r.precision, r.median_ms, r.quantize_ms});
  const std::vector<PrecisionTotals> totals = gemm_totals(times);
  std::fputs(format_gemm_totals(totals).c_str(), stdout);
  j["totals"] = gemm_totals_json(totals);
  print_clocks(clocks, stdout, "the GEMMs' calls, warm-up calls included");
  j["clocks"] = clocks_json(clocks);
  if (!opt.out.empty()) write_json_atomically(opt.out, j);
  return 0;
#endif
}

}  // namespace

int gemm_command(const GemmBenchOptions& opt) {
  try {
    return run_gemm_bench(opt);
  } catch (const UserError& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
}

}  // namespace moe
