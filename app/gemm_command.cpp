#include "app/gemm_command.h"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/backend.h"
#include "app/report.h"
#include "core/error.h"
#ifdef MOE_HAVE_CUDA
#include "kernels/cuda/gemm_bench.h"
#include "kernels/cuda/nvml_clocks.h"
#endif

namespace moe {

CLI::App* add_gemm_subcommand(CLI::App& app, GemmBenchOptions& opt) {
  CLI::App* g = app.add_subcommand(
      "gemm", "the expert GEMMs alone on a workload's shapes, per method (CUDA backend)");
  g->add_option("-c,--config", opt.config, "workload JSON (see configs/)")->required();
  g->add_option("--set", opt.sets, "override a workload key (repeatable)")->take_all();
  g->add_option("--ep", opt.ep, "expert-parallel size the shapes are for (default: mesh.ep, or 1)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  g->add_option("--iters", opt.iters, "timed calls per GEMM (median reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  g->add_option("--methods", opt.methods, "gemm.method values to time")
      ->capture_default_str()
      ->delimiter(',');
  g->add_option("-o,--out", opt.out, "write the figures as JSON here (atomically)");
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

namespace {

int run_gemm_bench(const GemmBenchOptions& opt) {
  Workload w = load_workload_file(opt.config);
  for (const std::string& s : opt.sets) apply_override(w, s);
  const int64_t ep = opt.ep > 0 ? opt.ep : (w.mesh.ep > 0 ? w.mesh.ep : 1);
  MOE_USER_CHECK(w.model.experts % ep == 0, "--ep " << ep << " does not divide model.experts "
                                                    << w.model.experts << "; pick a divisor");
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
  shape.rows = balanced_expert_rows(w, ep);
  shape.grad_dtype = w.expert_grad_dtype;
  shape.sm90 = cuda::schedule_of(w.gemm);
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
  double dense_tflops = 0;
  for (const auto& r : rows)
    if (r.gemm == "dense") dense_tflops = r.flops / (r.median_ms * 1e9);
  std::printf(
      "# %s at ep %lld: %lld local experts x %lld rows (balanced), H %lld, F %lld, "
      "expert_grad_dtype %s, gemm.sm90_cluster %d, gemm.sm90_schedule %s, precision %s; median "
      "of %d calls\n",
      w.name.c_str(), (long long)ep, (long long)shape.E_local, (long long)shape.rows.front(),
      (long long)shape.H, (long long)shape.F, dtype_name(shape.grad_dtype), shape.sm90.cluster,
      name_of(w.gemm.sm90_schedule), name_of(w.precision), opt.iters);
  std::printf("# %-10s %-24s %7s %7s %7s %10s %9s %7s %9s\n", "gemm", "method", "M", "N", "K",
              "median ms", "TFLOP/s", "%dense", "quant ms");
  nlohmann::json j = {{"workload", w.name},
                      {"ep", ep},
                      {"experts_local", shape.E_local},
                      {"rows", shape.rows},
                      {"iters", opt.iters},
                      {"sm90_cluster", shape.sm90.cluster},
                      {"sm90_schedule", name_of(w.gemm.sm90_schedule)},
                      {"precision", name_of(w.precision)},
                      {"gemms", nlohmann::json::array()}};
  for (const auto& r : rows) {
    const double tflops = r.flops / (r.median_ms * 1e9);
    if (r.flops > 0)
      std::printf("  %-10s %-24s %7lld %7lld %7lld %10.3f %9.1f %7.1f", r.gemm.c_str(),
                  r.method.c_str(), (long long)r.M, (long long)r.N, (long long)r.K, r.median_ms,
                  tflops, 100.0 * tflops / dense_tflops);
    else  // FP8's weights row: quantization only
      std::printf("  %-10s %-24s %7s %7s %7s %10.3f %9s %7s", r.gemm.c_str(), r.method.c_str(), "-",
                  "-", "-", r.median_ms, "-", "-");
    if (r.quantize_ms > 0)
      std::printf(" %9.3f\n", r.quantize_ms);
    else
      std::printf("\n");
    nlohmann::json row = {
        {"gemm", r.gemm},   {"method", r.method},       {"M", r.M},        {"N", r.N}, {"K", r.K},
        {"flops", r.flops}, {"median_ms", r.median_ms}, {"tflops", tflops}};
    if (r.quantize_ms > 0) row["quantize_ms"] = r.quantize_ms;
    j["gemms"].push_back(row);
  }
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
