#include "core/buffer_plan.h"

#include "core/routing_modes.h"
#include "core/saturating.h"

namespace moe {

BufferPlan plan_step_buffers(const Workload& w, int64_t S, int64_t G) {
  const int64_t H = w.model.hidden, F = w.model.ffn, E = w.model.experts, K = w.model.topk;
  const int64_t T = w.tokens_per_rank, fsdp = w.mesh.fsdp, El = E / w.mesh.ep;
  auto bytes = [](std::initializer_list<int64_t> f) { return saturating_product(f); };
  BufferPlan p;
  const int64_t in_elems = bytes({El, H, 2, F}), out_elems = bytes({El, F, H});
  p.shard_in_elems = in_elems == INT64_MAX ? in_elems : (in_elems + fsdp - 1) / fsdp;
  p.shard_out_elems = out_elems == INT64_MAX ? out_elems : (out_elems + fsdp - 1) / fsdp;
  p.w_gate = bytes({S, H, E});
  p.dw_gate = bytes({4, H, E});
  if (w.router.expert_bias) p.expert_bias = 4 * E;
  p.w_in_shard = bytes({S, p.shard_in_elems});
  p.w_out_shard = bytes({S, p.shard_out_elems});
  p.dw_in_full = bytes({G, p.shard_in_elems, fsdp});
  p.dw_out_full = bytes({G, p.shard_out_elems, fsdp});
  if (fsdp > 1) {
    p.w_in_full = bytes({S, p.shard_in_elems, fsdp});
    p.w_out_full = bytes({S, p.shard_out_elems, fsdp});
    p.dw_in_shard = bytes({G, p.shard_in_elems});
    p.dw_out_shard = bytes({G, p.shard_out_elems});
  }
  p.token_rows = bytes({S, T, H});
  p.dx_acc = bytes({4, T, H});
  p.token_scores = bytes({4, T, E});
  p.token_topk = bytes({4, T, K});
  p.num_token_topk = routing_is_forced(w) ? 4 : 3;
  p.stats = 4 * (2 * E + 1);
  p.row_h = bytes({H, S});
  p.row_2f = bytes({2, F, S});
  p.row_f = bytes({F, S});
  p.balanced_rows = saturating_sum({bytes({T, K}), bytes({El, w.align - 1})});
  return p;
}

int64_t BufferPlan::fixed_bytes() const {
  return saturating_sum({w_gate, dw_gate, expert_bias, w_in_shard, w_out_shard, w_in_full,
                         w_out_full, dw_in_full, dw_out_full, dw_in_shard, dw_out_shard,
                         saturating_product({4, token_rows}), dx_acc,
                         saturating_product({3, token_scores}),
                         saturating_product({num_token_topk, token_topk}), stats});
}

int64_t BufferPlan::ragged_bytes(int64_t rows) const {
  // Each ragged buffer grows on its own, with its own headroom.
  auto buffers = [rows](int64_t n, int64_t per_row) {
    return saturating_product({n, grown_bytes(saturating_product({rows, per_row}))});
  };
  return saturating_sum({buffers(4, row_h), buffers(2, row_2f), buffers(2, row_f)});
}

}  // namespace moe
