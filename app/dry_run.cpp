#include "app/dry_run.h"

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>
#include <vector>

#include "app/backend.h"
#include "core/cost_model.h"
#include "core/dispatcher.h"
#include "core/mesh.h"
#include "core/moe_layer.h"

namespace moe {
namespace {

using nlohmann::json;

double gib(double bytes) { return bytes / double(int64_t(1) << 30); }

// Tensor cores and 16-byte vector moves want bf16 rows of whole 16-byte vectors (8 elements): the
// CUDA row moves fall back to one element at a time, the grouped GEMM call to the loop.
constexpr int64_t kShapeMultiple = 8;
// Below this many rows an expert's GEMMs time their launch and planning more than their math.
constexpr double kMinRowsPerExpert = 16;

std::vector<std::string> shape_warnings(const Workload& w, const Mesh& m, double rows_per_expert) {
  std::vector<std::string> out;
  std::vector<std::pair<const char*, int64_t>> widths = {{"model.hidden", w.model.hidden},
                                                         {"model.ffn", w.model.ffn}};
  if (w.model.shared_experts > 0) widths.push_back({"model.shared_ffn", w.model.shared_ffn});
  for (const auto& [key, v] : widths)
    if (v % kShapeMultiple != 0) {
      std::ostringstream os;
      os << key << " = " << v << " is not a multiple of " << kShapeMultiple
         << ": its bf16 rows are not whole 16-byte vectors, so the CUDA kernels move them an "
            "element at a time and the GEMMs lose their fast paths; published models use "
            "multiples of 64 (the CPU backend does not care)";
      out.push_back(os.str());
    }
  if (rows_per_expert < kMinRowsPerExpert) {
    std::ostringstream os;
    os << "about " << std::defaultfloat << std::setprecision(3) << rows_per_expert
       << (step_chunks(w) > 1 ? " rows per expert and chunk" : " rows per expert")
       << " at balanced routing (tokens_per_rank " << w.tokens_per_rank << " x mesh.ep " << m.ep
       << " x model.topk " << w.model.topk << " / model.experts " << w.model.experts
       << (step_chunks(w) > 1 ? " / overlap_chunks " : "");
    if (step_chunks(w) > 1) os << step_chunks(w);
    os << "), under " << kMinRowsPerExpert
       << ": GEMMs this thin measure launch and planning overhead, not the math; raise "
          "tokens_per_rank or mesh.ep"
       << (step_chunks(w) > 1 ? ", or lower overlap_chunks" : "");
    out.push_back(os.str());
  }
  return out;
}

// A key read only beside another: set alone it does nothing, which a user ablating a model (a
// DeepSeek-V3 config with model.shared_experts=0) should see, not guess.
std::vector<std::string> unused_key_warnings(const Workload& w) {
  if (w.model.shared_experts > 0 || w.model.shared_ffn == 0) return {};
  std::ostringstream os;
  os << "model.shared_ffn = " << w.model.shared_ffn
     << " has no effect: model.shared_experts = 0, so there are no shared experts (set "
        "model.shared_experts >= 1 to add them)";
  return {os.str()};
}

// With FP8 and fp8_weights per_step each step quantizes every expert weight the rank holds (after
// the FSDP gather), both ways round: 2 bytes read and 2 written per parameter (fp8_tensor reads
// them once more for the amaxes), at the memory's rate whatever the rows, while the GEMMs' saving
// grows with the rows. With fp8_weights cached the steps reuse one quantization (its time is
// reported apart), so nothing here applies.
// Measured on H100s: DeepSeek-V3's shapes lost in FP8 at 128 rows per expert (EP 1: fp8_block
// 44.7 ms a step against bf16's 34.0, the weights' quantization alone 16.7 ms,
// results/2026-11-27-small-kernels), at 256 (EP 2, 2026-11-26-h100x2-ep2) and at 512 (EP 4,
// 2026-11-26-h100x4); Mixtral-8x7B's 4096 won (1.35-1.40x).
constexpr double kFp8MinRowsPerExpert = 512;

std::vector<std::string> fp8_warnings(const Workload& w, const Mesh& m, double rows_per_expert) {
  if (w.precision == Precision::kBf16 || w.fp8_weights == Fp8Weights::kCached ||
      rows_per_expert > kFp8MinRowsPerExpert)
    return {};
  const double params = routed_weight_elems(w, m) + shared_weight_elems(w.model);
  const double bytes = params * (w.precision == Precision::kFp8Tensor ? 6.0 : 4.0);
  std::ostringstream os;
  os << "precision " << name_of(w.precision) << " with about " << std::defaultfloat
     << std::setprecision(3) << rows_per_expert
     << " rows per expert at balanced routing: every step quantizes the rank's expert weights "
        "anew (about "
     << std::fixed << std::setprecision(1) << gib(bytes)
     << " GiB read and written per rank), which cost more than FP8's faster GEMMs saved at "
     << int64_t(kFp8MinRowsPerExpert)
     << " rows per expert or fewer on H100s (results/2026-11-27-small-kernels); FP8 pays with "
        "more rows per expert: raise tokens_per_rank or mesh.ep, set fp8_weights cached (one "
        "quantization per optimizer step, as over microbatches), or keep precision bf16";
  return {os.str()};
}

// The dispatcher's predicted bytes per rank: the dispatch direction's (every direction's where
// they are equal, as for alltoall), each direction's, and the step's in all.
json dispatch_json(const Workload& w, const Mesh& m, const DispatchBytes& b) {
  const double to_others = m.ep > 1 ? double(m.ep - 1) / double(m.ep) : 0.0;
  json directions = json::object();
  for (int dir = 0; dir < kNumDirs; ++dir) directions[direction_name(dir)] = b.direction[dir];
  return {{"name", name_of(w.dispatch)},
          {"collectives_per_step", b.collectives_per_step},
          {"bytes_per_rank_per_direction", b.direction[kDirDispatchFwd]},
          {"bytes_to_other_ranks", b.direction[kDirDispatchFwd] * to_others},
          {"bytes_per_rank_by_direction", directions},
          {"layout_bytes_per_rank", b.layout},
          {"other_bytes_per_rank", b.other},
          {"bytes_per_rank_per_step", b.per_step()},
          {"bytes_to_other_ranks_per_step", b.per_step() * to_others},
          {"rows_per_token_to_other_ranks", b.rows_per_token_to_others}};
}

}  // namespace

json dry_run_plan(const Workload& w, int world, const std::string& backend, const PlanHost& host) {
  const Mesh m = make_mesh(world, 0, w.mesh.ep, w.mesh.fsdp, w.model.experts);
  const double T = double(w.tokens_per_rank), E = double(w.model.experts), K = double(w.model.topk),
               N = T * world;
  const int storage = storage_bytes_of(backend, w.dtype);
  // Each rank's experts see the rows of its EP group's tokens.
  const double El = double(m.experts_per_rank), rows_per_expert = T * m.ep * K / E;
  // A pipelined step runs each expert's GEMMs once per chunk, on the chunk's rows.
  const double chunks = double(step_chunks(w)), chunk_rows = rows_per_expert / chunks;
  const double flops = model_flops_per_step(w.model, N, N * K);         // dropless
  const DispatchBytes a2a = step_dispatch_bytes(w, m, storage, T * K);  // dropless
  const std::vector<PhaseCost> costs = phase_costs(w, m, storage, storage, N * K);
  const MemoryNeed need = estimate_memory_need(w, world, backend);
  json step_parts = json::object();
  for (const StepMemory::Part& part : need.step.parts()) step_parts[part.key] = part.bytes;
  // The host holds the step's buffers on the CPU backend, and the float64 reference's on both.
  const int64_t host_per_rank = (backend == "cpu" ? need.step.total() : 0) + need.check.host;

  json plan = {
      {"workload", w.name},
      {"backend", backend},
      {"mesh",
       {{"world", world},
        {"ep", m.ep},
        {"fsdp", m.fsdp},
        {"experts_per_rank", m.experts_per_rank}}},
      {"config", workload_to_json(w)},
      {"balanced_routing",
       {{"rows_per_local_expert", rows_per_expert},
        {"rows_per_rank", rows_per_expert * El},
        {"capacity_may_drop", w.capacity_factor > 0}}},
      {"chunks", {{"count", chunks}, {"tokens_per_chunk", T / chunks}}},
      // Per local expert (and chunk), forward: [rows x H] @ [H x 2F] and [rows x F] @ [F x H]
      // (m x k @ k x n).
      {"expert_gemms",
       {{{"m", chunk_rows}, {"k", w.model.hidden}, {"n", 2 * w.model.ffn}},
        {{"m", chunk_rows}, {"k", w.model.ffn}, {"n", w.model.hidden}}}},
      // Per shared expert, forward: [T x H] @ [H x 2F_sh] and [T x F_sh] @ [F_sh x H].
      {"shared_experts",
       {{"count", w.model.shared_experts},
        {"ffn", w.model.shared_ffn_used()},
        {"gemms", w.model.shared_experts == 0
                      ? json::array()
                      : json{{{"m", T}, {"k", w.model.hidden}, {"n", 2 * w.model.shared_ffn}},
                             {{"m", T}, {"k", w.model.shared_ffn}, {"n", w.model.hidden}}}}}},
      {"model_flops_per_step", flops},
      {"tflop_per_rank_per_step", flops / world * 1e-12},
      {"dispatch", dispatch_json(w, m, a2a)},
      {"fsdp_gather_bytes_per_rank", m.fsdp > 1 ? costs[kFsdpGather].bytes : 0.0},
      {"memory",
       {{"estimate", "per rank, balanced routing"},
        {"step_bytes", need.step.total()},
        {"step_parts", step_parts},
        {"step_memory", backend == "cuda" ? "gpu" : "host"},
        {"check_host_bytes", need.check.host},
        {"check_gpu_bytes", need.check.device},
        {"host_bytes_per_rank", host_per_rank},
        {"host_ranks", host.ranks},
        {"host_total_bytes", host.memory_bytes},
        {"gpu_total_bytes", host.gpu_memory_bytes}}}};

  std::vector<std::string> warnings;
  const double host_need = double(host_per_rank) * host.ranks;
  if (host.memory_bytes > 0 && host_need > double(host.memory_bytes)) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(1) << "the plan needs about " << gib(host_need)
       << " GiB of host memory (" << gib(double(host_per_rank)) << " GiB per rank x " << host.ranks
       << (host.ranks == 1 ? " rank" : " ranks") << " on this host) but the host has "
       << gib(double(host.memory_bytes))
       << " GiB in all (MemTotal): lower tokens_per_rank, raise mesh.ep, spread the ranks over "
          "more hosts"
       << (w.check == CheckMode::kOff ? ""
           : backend == "cuda"        ? ", set reference=gpu or check=off"
                                      : ", or set check=off (the float64 reference holds every "
                                        "expert)");
    warnings.push_back(os.str());
  }
  // On the CUDA backend each rank's GPU holds the step's buffers and the GPU reference's.
  const double gpu_need = double(need.step.total() + need.check.device);
  if (backend == "cuda" && host.gpu_memory_bytes > 0 && gpu_need > double(host.gpu_memory_bytes)) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(1) << "the plan needs about " << gib(gpu_need)
       << " GiB of GPU memory per rank but this host's GPU has "
       << gib(double(host.gpu_memory_bytes))
       << " GiB: lower tokens_per_rank, raise mesh.ep or mesh.fsdp"
       << (w.check == CheckMode::kOff ? "" : ", or set check=off (the GPU reference's buffers)");
    warnings.push_back(os.str());
  }
  for (std::string& s : shape_warnings(w, m, chunk_rows)) warnings.push_back(std::move(s));
  for (std::string& s : fp8_warnings(w, m, rows_per_expert)) warnings.push_back(std::move(s));
  for (std::string& s : unused_key_warnings(w)) warnings.push_back(std::move(s));
  plan["warnings"] = warnings;
  return plan;
}

void print_dry_run(const Workload& w, const json& plan, bool as_json) {
  if (as_json) {
    std::printf("%s\n", plan.dump().c_str());
    std::fflush(stdout);
    return;
  }
  const json& m = plan["mesh"];
  const json& cfg = plan["config"];
  const json& br = plan["balanced_routing"];
  const json& mem = plan["memory"];
  const int world = m["world"];
  const double rows = br["rows_per_local_expert"], flops = plan["model_flops_per_step"];
  const double H = cfg["model"]["hidden"], F = cfg["model"]["ffn"];
  std::printf("# dry run (nothing runs, nothing is written): %s on %d rank%s, backend %s\n",
              plan["workload"].get<std::string>().c_str(), world, world == 1 ? "" : "s",
              plan["backend"].get<std::string>().c_str());
  std::printf(
      "# mesh ep %d x fsdp %d: %ld experts per EP rank, %ld tokens per rank, dtype %s, "
      "expert gradients %s, expert GEMMs %s, dispatched rows %s\n",
      m["ep"].get<int>(), m["fsdp"].get<int>(), m["experts_per_rank"].get<long>(),
      cfg["tokens_per_rank"].get<long>(), cfg["dtype"].get<std::string>().c_str(),
      cfg["expert_grad_dtype"].get<std::string>().c_str(),
      cfg["precision"].get<std::string>().c_str(),
      cfg["dispatch_dtype"].get<std::string>().c_str());
  std::printf("# knobs: %s\n", describe_how_keys(w).c_str());
  std::printf("# balanced routing: %.0f rows per local expert, %.0f rows per rank%s\n", rows,
              br["rows_per_rank"].get<double>(),
              br["capacity_may_drop"].get<bool>() ? " (at most: the capacity may drop rows)" : "");
  const json& chunks = plan["chunks"];
  const double m_rows = plan["expert_gemms"][0]["m"];
  if (chunks["count"].get<double>() > 1)
    std::printf(
        "# pipeline: %.0f chunks of %.0f tokens, each dispatched, run through the experts "
        "and combined on its own (overlap pipeline); the weight gradients once, over every "
        "chunk's rows\n",
        chunks["count"].get<double>(), chunks["tokens_per_chunk"].get<double>());
  const bool chunked = chunks["count"].get<double>() > 1;
  std::printf(
      "# expert GEMMs per local expert%s: [%.0f x %.0f] @ [%.0f x %.0f] and [%.0f x %.0f] @ "
      "[%.0f x %.0f] forward, %s backward\n",
      chunked ? " and chunk" : "", m_rows, H, H, 2 * F, m_rows, F, F, H,
      chunked ? "their dgrad (the wgrad over all chunks' rows)" : "their dgrad and wgrad");
  const json& sh = plan["shared_experts"];
  if (sh["count"].get<int64_t>() > 0) {
    const double Fs = sh["ffn"], T = cfg["tokens_per_rank"];
    std::printf(
        "# shared experts: %ld, each [%.0f x %.0f] @ [%.0f x %.0f] and [%.0f x %.0f] @ [%.0f x "
        "%.0f] forward over every token of the rank%s\n",
        sh["count"].get<long>(), T, H, H, 2 * Fs, T, Fs, Fs, H,
        cfg["overlap"] == "none" ? "" : ", beside the dispatch (overlap)");
  }
  std::printf(
      "# model FLOPs per step: %.4g, %.4g TFLOP per rank (step ms = %.1f / TFLOP/s per "
      "rank)\n",
      flops, flops / world * 1e-12, flops / world * 1e-9);
  const json& d = plan["dispatch"];
  if (d["collectives_per_step"].get<int>() > 0) {
    const json& dirs = d["bytes_per_rank_by_direction"];
    const double first = d["bytes_per_rank_per_direction"].get<double>();
    bool equal = true;
    for (int dir = 0; dir < kNumDirs; ++dir)
      equal = equal && dirs[direction_name(dir)].get<double>() == first;
    if (equal) {
      std::printf(
          "# dispatch %s: %.1f MiB per rank per direction, %.1f MiB of it to other ranks; "
          "%d collectives per step",
          d["name"].get<std::string>().c_str(), first / (1 << 20),
          d["bytes_to_other_ranks"].get<double>() / (1 << 20),
          d["collectives_per_step"].get<int>());
    } else {
      std::printf("# dispatch %s: per rank", d["name"].get<std::string>().c_str());
      for (int dir = 0; dir < kNumDirs; ++dir)
        std::printf(" %s %.1f MiB,", direction_name(dir),
                    dirs[direction_name(dir)].get<double>() / (1 << 20));
      std::printf(" %d collectives per step", d["collectives_per_step"].get<int>());
    }
    std::printf(
        "; %.1f MiB to other ranks per step in all (layout included), %.2f rows per token to "
        "other ranks\n",
        d["bytes_to_other_ranks_per_step"].get<double>() / (1 << 20),
        d["rows_per_token_to_other_ranks"].get<double>());
  } else {
    std::printf("# dispatch %s: no collective (ep 1)\n", d["name"].get<std::string>().c_str());
  }
  if (m["fsdp"].get<int>() > 1)
    std::printf("# FSDP: all-gather of %.1f MiB of expert weights per rank per step\n",
                plan["fsdp_gather_bytes_per_rank"].get<double>() / (1 << 20));
  std::printf("# memory per rank (estimate, balanced routing): step %.2f GiB of %s memory",
              gib(mem["step_bytes"].get<double>()), mem["step_memory"] == "gpu" ? "GPU" : "host");
  // Of it, by what the buffers hold (parts under 0.01 GiB left out).
  bool any = false;
  for (const StepMemory::Part& part : StepMemory{}.parts()) {
    const double bytes = mem["step_parts"][part.key].get<double>();
    if (bytes < 0.005 * (1 << 30)) continue;
    std::printf("%s%s %.2f", any ? ", " : " (", part.what, gib(bytes));
    any = true;
  }
  if (any) std::printf(" GiB)");
  if (cfg["check"] != "off") {
    std::printf("; the check %.2f GiB of host memory", gib(mem["check_host_bytes"].get<double>()));
    if (mem["check_gpu_bytes"].get<int64_t>() > 0)
      std::printf(" and %.2f GiB of GPU memory", gib(mem["check_gpu_bytes"].get<double>()));
  }
  std::printf("\n");
  for (const json& warning : plan["warnings"])
    std::printf("# warning: %s\n", warning.get<std::string>().c_str());
  std::fflush(stdout);
}

}  // namespace moe
