#include "core/buffer_plan.h"

#include "core/fp8.h"
#include "core/fp8_scales.h"
#include "core/layout.h"
#include "core/placement.h"
#include "core/routing_modes.h"
#include "core/saturating.h"

namespace moe {
namespace {

int64_t product(std::initializer_list<int64_t> f) { return saturating_product(f); }

// The buffers of two flattened weight tensors kept in FSDP shards of shard_in and shard_out
// elements, S bytes per weight and G per gradient element (BufferPlan's and SharedBuffers' fields
// of these names): the gathered weights and the reduced gradient shards exist only with fsdp > 1.
template <class Plan>
void plan_fsdp_weights(Plan& p, int64_t shard_in, int64_t shard_out, int64_t fsdp, int64_t S,
                       int64_t G) {
  p.shard_in_elems = shard_in;
  p.shard_out_elems = shard_out;
  p.w_in_shard = product({S, shard_in});
  p.w_out_shard = product({S, shard_out});
  p.dw_in_full = product({G, shard_in, fsdp});
  p.dw_out_full = product({G, shard_out, fsdp});
  if (fsdp == 1) return;
  p.w_in_full = product({S, shard_in, fsdp});
  p.w_out_full = product({S, shard_out, fsdp});
  p.dw_in_shard = product({G, shard_in});
  p.dw_out_shard = product({G, shard_out});
}

SharedBuffers plan_shared_buffers(const Workload& w, int64_t S, int64_t G) {
  SharedBuffers p;
  const int64_t n = w.model.shared_experts, H = w.model.hidden, F = w.model.shared_ffn;
  if (n == 0) return p;
  const int64_t T = w.tokens_per_rank, ep = w.mesh.ep, fsdp = w.mesh.fsdp, world = ep * fsdp;
  auto part = [world](int64_t elems) {
    return elems == INT64_MAX ? elems : (elems + world - 1) / world;
  };
  p.part_in_elems = part(product({n, H, 2, F}));
  p.part_out_elems = part(product({n, F, H}));
  plan_fsdp_weights(p, product({ep, p.part_in_elems}), product({ep, p.part_out_elems}), fsdp, S, G);
  if (ep > 1) {
    p.dw_in_part = product({G, p.part_in_elems});
    p.dw_out_part = product({G, p.part_out_elems});
  }
  p.h = product({S, n, T, 2, F});
  p.a = product({S, n, T, F});
  p.y = product({S, n, T, H});
  p.da = product({S, T, F});
  p.dh = product({S, T, 2, F});
  p.offsets = 2 * 8;
  return p;
}

}  // namespace

int64_t SharedBuffers::bytes() const {
  return saturating_sum({w_in_shard, w_out_shard, w_in_full, w_out_full, dw_in_full, dw_out_full,
                         dw_in_shard, dw_out_shard, dw_in_part, dw_out_part, h, a, y, da, dh,
                         offsets});
}

int64_t expert_rows_bound(int64_t ep, int64_t T, int64_t K, int64_t E_local, int64_t align) {
  return saturating_sum({saturating_product({ep, T, K}), saturating_product({E_local, align - 1})});
}

BufferPlan plan_step_buffers(const Workload& w, int64_t S, int64_t G) {
  const int64_t H = w.model.hidden, F = w.model.ffn, E = w.model.experts, K = w.model.topk;
  const int64_t T = w.tokens_per_rank, fsdp = w.mesh.fsdp, El = E / w.mesh.ep;
  auto bytes = [](std::initializer_list<int64_t> f) { return saturating_product(f); };
  BufferPlan p;
  const int64_t in_elems = bytes({El, H, 2, F}), out_elems = bytes({El, F, H});
  auto shard = [fsdp](int64_t elems) {
    return elems == INT64_MAX ? elems : (elems + fsdp - 1) / fsdp;
  };
  plan_fsdp_weights(p, shard(in_elems), shard(out_elems), fsdp, S, G);
  p.w_gate = bytes({S, H, E});
  p.dw_gate = bytes({4, H, E});
  if (w.router.expert_bias) p.expert_bias = 4 * E;
  p.token_rows = bytes({S, T, H});
  p.dx_acc = bytes({4, T, H});
  p.token_scores = bytes({4, T, E});
  p.token_topk = bytes({4, T, K});
  p.num_token_topk = routing_is_forced(w) ? 4 : 3;
  if (places_experts(w)) {
    p.num_token_topk += 1;
    p.expert_slots = 4 * E;
  }
  p.stats = 4 * (2 * E + 1);
  if (w.precision == Precision::kFp8Tensor)
    p.fp8_scales = bytes({4, step_chunks(w), kNumFp8Computed, El});
  p.row_h = bytes({H, S});
  p.row_2f = bytes({2, F, S});
  p.row_f = bytes({F, S});
  p.row_xe = p.row_h;
  if (w.dispatch_dtype == DispatchDtype::kFp8) {
    p.row_xe = fp8_row_bytes(H);
    p.token_rows_fp8 = bytes({T, p.row_xe});
  }
  const int64_t chunks = step_chunks(w);
  const int64_t chunk_rows =
      w.graph ? expert_rows_bound(w.mesh.ep, T / chunks, K, El, w.align)
              : saturating_sum({bytes({T / chunks, K}), bytes({El, w.align - 1})});
  p.planned_rows = chunk_rows;
  p.ragged_exact = w.graph;
  for (int64_t c = 1; c < chunks; ++c)
    p.planned_rows = saturating_sum({chunk_rows_begin(p.planned_rows), chunk_rows});
  if (chunks > 1) {
    p.merged_offsets = 8 * (El + 1);
    p.merged_blocks = bytes({8, 3, merged_chunk_blocks(chunks, w.mesh.ep, El)});
    p.num_xe = 2;
  }
  p.shared = plan_shared_buffers(w, S, G);
  return p;
}

int64_t BufferPlan::weight_bytes() const {
  return saturating_sum({w_gate, expert_bias, w_in_shard, w_out_shard, w_in_full, w_out_full});
}

int64_t BufferPlan::gradient_bytes() const {
  return saturating_sum(
      {dw_gate, dw_in_full, dw_out_full, dw_in_shard, dw_out_shard, merged_offsets, merged_blocks});
}

int64_t BufferPlan::token_bytes() const {
  return saturating_sum({saturating_product({4, token_rows}), token_rows_fp8, dx_acc,
                         saturating_product({3, token_scores}),
                         saturating_product({num_token_topk, token_topk}), stats, expert_slots,
                         fp8_scales});
}

int64_t BufferPlan::fixed_bytes() const {
  return saturating_sum({weight_bytes(), gradient_bytes(), token_bytes(), shared.bytes()});
}

int64_t BufferPlan::ragged_bytes(int64_t rows) const {
  // Each ragged buffer grows on its own, with its own headroom.
  auto buffers = [this, rows](int64_t n, int64_t per_row) {
    return saturating_product({n, ragged_buffer_bytes(saturating_product({rows, per_row}))});
  };
  return saturating_sum(
      {buffers(num_xe, row_xe), buffers(3, row_h), buffers(2, row_2f), buffers(2, row_f)});
}

}  // namespace moe
