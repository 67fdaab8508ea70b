#include "core/cost_model.h"

#include "core/dispatcher.h"

namespace moe {

const char* const kModelFlopsFormula =
    "18*N*K*H*F + 18*N*S*H*F_sh + 6*N*H*E (routed and shared expert GEMMs fwd+bwd, router "
    "fwd+bwd)";

double model_flops_per_step(const ModelShape& m, double tokens, double rows_kept) {
  const double H = double(m.hidden), F = double(m.ffn), E = double(m.experts);
  return 18.0 * rows_kept * H * F + 18.0 * tokens * shared_width(m) * H + 6.0 * tokens * H * E;
}

double shared_width(const ModelShape& m) {
  return double(m.shared_experts) * double(m.shared_ffn_used());
}

double routed_weight_elems(const Workload& w, const Mesh& m) {
  return double(m.experts_per_rank) * 3 * double(w.model.hidden) * double(w.model.ffn);
}

double shared_weight_elems(const ModelShape& m) { return 3 * double(m.hidden) * shared_width(m); }

std::vector<PhaseCost> phase_costs(const Workload& w, const Mesh& m, size_t storage_bytes,
                                   size_t grad_bytes, double rows_kept) {
  const double N = double(w.tokens_per_rank) * m.world, H = double(w.model.hidden),
               F = double(w.model.ffn), E = double(w.model.experts);
  const double ep = m.ep, fsdp = m.fsdp, sb = double(storage_bytes), gb = double(grad_bytes);
  const double rows = rows_kept / m.world;  // per rank
  const double weight_elems = routed_weight_elems(w, m);
  std::vector<PhaseCost> c(kNumPhases);
  c[kRouterFwd].flops = 2 * N * H * E;
  c[kRouterBwd].flops = 4 * N * H * E;
  c[kExpertsFwd].flops = 6 * rows_kept * H * F;
  c[kExpertsBwd].flops = 12 * rows_kept * H * F;
  // Bytes no implementation avoids, per rank: every local expert's weights read once; the rows in
  // and out (forward: xe in, ye out; backward: dye, xe and h in, dxe out); the weight gradients
  // written once (fp32 or bf16: expert_grad_dtype). In FP8 the weights are read as their one-byte
  // codes, but in a forward that quantizes them (fp8_weights per_step), which reads them stored.
  const bool fp8 = w.precision != Precision::kBf16;
  const double wb_fwd = fp8 && w.fp8_weights == Fp8Weights::kCached ? 1 : sb;
  const double wb_bwd = fp8 ? 1 : sb;
  c[kExpertsFwd].mem_bytes = weight_elems * wb_fwd + rows * 2 * H * sb;
  c[kExpertsBwd].mem_bytes = weight_elems * (wb_bwd + gb) + rows * (3 * H + 2 * F) * sb;
  c[kExpertsFwd].fp8 = c[kExpertsBwd].fp8 = fp8;
  // The shared experts: every token of the rank through each, counted as the experts are (S x
  // F_sh is their total width: each token's rows in and out once per shared expert).
  const double SF = shared_width(w.model), S = double(w.model.shared_experts);
  const double shared_elems = shared_weight_elems(w.model), T = double(w.tokens_per_rank);
  if (SF > 0) {
    c[kSharedFwd].flops = 6 * N * H * SF;
    c[kSharedBwd].flops = 12 * N * H * SF;
    c[kSharedFwd].mem_bytes = shared_elems * wb_fwd + S * T * 2 * H * sb;
    c[kSharedBwd].mem_bytes = shared_elems * (wb_bwd + gb) + T * (3 * H * S + 2 * SF) * sb;
    c[kSharedFwd].fp8 = c[kSharedBwd].fp8 = fp8;
  }
  // The dispatcher's collectives: each direction moves what the dispatcher says for the rows
  // kept (none at ep 1).
  const DispatchBytes d = step_dispatch_bytes(w, m, storage_bytes, rows);
  const int a2a_phase[kNumDirs] = {kA2aDispatchFwd, kA2aCombineFwd, kA2aCombineBwd,
                                   kA2aDispatchBwd};
  for (int dir = 0; dir < kNumDirs; ++dir) {
    if (d.direction[dir] == 0) continue;
    c[a2a_phase[dir]].bytes = d.direction[dir];
    c[a2a_phase[dir]].bus_factor = (ep - 1) / ep;
  }
  if (m.fsdp > 1) {
    c[kFsdpGather].bytes = (weight_elems + shared_elems) * sb;
    c[kFsdpGather].bus_factor = (fsdp - 1) / fsdp;
    // The reduce-scatter dominates the dw_gate all-reduce.
    c[kGradSync].bytes = weight_elems * gb;
    c[kGradSync].bus_factor = (fsdp - 1) / fsdp;
  }
  // The shared experts' gradients are reduce-scattered over the world (then all-gathered over the
  // EP group, not counted): with them the phase is read at the world's bus factor.
  if (SF > 0 && m.world > 1) {
    c[kGradSync].bytes += shared_elems * gb;
    c[kGradSync].bus_factor = (m.world - 1.0) / m.world;
  }
  c[kCountsExchange].bytes = d.layout;
  c[kCountsExchange].bus_factor = (ep - 1) / ep;
  return c;
}

}  // namespace moe
