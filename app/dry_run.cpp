#include "app/dry_run.h"

#include <cstdio>

#include "app/backend.h"
#include "app/report.h"
#include "core/cost_model.h"
#include "core/dispatcher.h"
#include "core/mesh.h"
#include "core/moe_layer.h"

namespace moe {
namespace {

double gib(double bytes) { return bytes / double(int64_t(1) << 30); }

}  // namespace

void print_dry_run(const Workload& w, int world, const std::string& backend) {
  const Mesh m = make_mesh(world, 0, w.mesh.ep, w.mesh.fsdp, w.model.experts);
  const double T = double(w.tokens_per_rank), H = double(w.model.hidden), F = double(w.model.ffn),
               E = double(w.model.experts), K = double(w.model.topk), N = T * world;
  const int storage = storage_bytes_of(backend, w.dtype);
  // Each rank's experts see the rows of its EP group's tokens.
  const double El = double(m.experts_per_rank), rows_per_expert = T * m.ep * K / E;
  std::printf("# dry run (nothing runs, nothing is written): %s on %d rank%s, backend %s\n",
              w.name.c_str(), world, world == 1 ? "" : "s", backend.c_str());
  std::printf(
      "# mesh ep %d x fsdp %d: %ld experts per EP rank, %ld tokens per rank, dtype %s, "
      "expert gradients %s\n",
      m.ep, m.fsdp, long(m.experts_per_rank), long(w.tokens_per_rank), dtype_name(w.dtype),
      dtype_name(w.expert_grad_dtype));
  std::printf("# knobs: %s\n", describe_how_keys(w).c_str());
  std::printf("# balanced routing: %.0f rows per local expert, %.0f rows per rank%s\n",
              rows_per_expert, rows_per_expert * El,
              w.capacity_factor > 0 ? " (at most: the capacity may drop rows)" : "");
  std::printf(
      "# expert GEMMs per local expert: [%.0f x %.0f] @ [%.0f x %.0f] and [%.0f x %.0f] @ "
      "[%.0f x %.0f] forward, their dgrad and wgrad backward\n",
      rows_per_expert, H, H, 2 * F, rows_per_expert, F, F, H);
  const double flops = model_flops_per_step(w.model, N, N * K);  // dropless
  std::printf(
      "# model FLOPs per step: %.4g, %.4g TFLOP per rank (step ms = %.1f / TFLOP/s per "
      "rank)\n",
      flops, flops / world * 1e-12, flops / world * 1e-9);
  const DispatchBytes a2a = dispatch_bytes_for_rows(w, m, storage, T * K);  // dropless
  if (a2a.collectives_per_step > 0) {
    std::printf(
        "# dispatch %s: %.1f MiB per rank per direction, %.1f MiB of it to other ranks; "
        "%d per step\n",
        name_of(w.dispatch), a2a.per_direction / (1 << 20), a2a.to_others / (1 << 20),
        a2a.collectives_per_step);
  } else {
    std::printf("# dispatch %s: no collective (ep 1)\n", name_of(w.dispatch));
  }
  const std::vector<PhaseCost> costs = phase_costs(w, m, storage, storage, N * K);
  if (m.fsdp > 1)
    std::printf("# FSDP: all-gather of %.1f MiB of expert weights per rank per step\n",
                costs[kFsdpGather].bytes / (1 << 20));
  const MemoryNeed need = estimate_memory_need(w, world, backend);
  const double step = double(need.step);
  const ReferenceBytes& ref = need.check;
  const char* where = backend == "cuda" ? "GPU" : "host";
  std::printf("# memory per rank (estimate, balanced routing): step %.2f GiB of %s memory",
              gib(step), where);
  if (w.check != CheckMode::kOff) {
    std::printf("; the check %.2f GiB of host memory", gib(double(ref.host)));
    if (ref.device > 0) std::printf(" and %.2f GiB of GPU memory", gib(double(ref.device)));
  }
  std::printf("\n");
}

}  // namespace moe
