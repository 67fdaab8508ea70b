#include "core/ops.h"

#include "core/routing_modes.h"

namespace moe {

Dims step_dims(const Workload& w, const Mesh& mesh) {
  Dims d;
  d.T = w.tokens_per_rank;
  d.H = w.model.hidden;
  d.F = w.model.ffn;
  d.E = w.model.experts;
  d.K = w.model.topk;
  d.E_local = mesh.experts_per_rank;
  d.ep = mesh.ep;
  d.fsdp = mesh.fsdp;
  d.world = mesh.world;
  d.N = d.T * mesh.world;
  d.dtype = w.dtype;
  d.grad_dtype = w.expert_grad_dtype;
  d.precision = w.precision;
  d.capacity = expert_capacity(w);
  d.drop_by_position = w.drop_policy == DropPolicy::kPosition;
  d.align = w.align;
  d.sync_free = w.graph;
  d.dispatch_fp8 = w.dispatch_dtype == DispatchDtype::kFp8;
  return d;
}

}  // namespace moe
