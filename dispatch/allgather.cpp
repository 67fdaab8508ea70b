#include "dispatch/allgather.h"

#include <algorithm>

#include "core/buffer_plan.h"
#include "core/error.h"
#include "core/layout.h"
#include "core/saturating.h"

namespace moe {

AllgatherDispatcher::AllgatherDispatcher(const Dims& d, const Mesh& mesh, Device& device, Ops& ops,
                                         Comm& comm, PhaseTimer& timer,
                                         const DispatchPhases& phases)
    : DispatcherBase(d, mesh, device, ops, comm, timer, phases),
      dg_(d),
      blocks_(d, device, ops, buffers_, expert_rows_bound(d.ep, d.T, d.K, d.E_local, d.align)) {
  const int64_t T = d_.T, H = d_.H, E = d_.E, K = d_.K, ep = d_.ep;
  MOE_CHECK(ep > 1, "dispatch allgather at ep 1: make_dispatcher builds alltoall's");
  dg_.T = ep * T;
  check_int32_positions("lower tokens_per_rank or use dispatch = alltoall");
  const size_t sb = device.storage_bytes();
  counts_ = buffers_.alloc<int32_t>(4 * E);
  send_pos_ = buffers_.alloc<int32_t>(4 * T * K);
  pos_ = buffers_.alloc<int32_t>(4 * ep * T * K);
  counts_all_ = buffers_.alloc<int32_t>(4 * ep * E);
  send_pos_all_ = buffers_.alloc<int32_t>(4 * ep * T * K);
  p_all_ = buffers_.alloc<float>(4 * ep * T * K);
  rows_all_ = buffers_.alloc(sb * ep * T * H);
  partial_ = buffers_.alloc<float>(4 * ep * T * H);
  out_f32_ = buffers_.alloc<float>(4 * T * H);
  dp_all_ = buffers_.alloc<float>(4 * ep * T * K);
  counts_host_.resize(E);
}

void AllgatherDispatcher::layout(const int32_t* idx, const float* p) {
  const int64_t T = d_.T, E = d_.E, K = d_.K;
  // Each rank decides its own rows' drops, as alltoall's layout does (capacity per source rank).
  ops_.dispatch_layout(d_, idx, p, counts_, send_pos_);
  timer_.begin(phases_.counts_exchange);
  comm_.allgather(counts_, counts_all_, 4 * E, Group::kEp);
  comm_.allgather(send_pos_, send_pos_all_, 4 * T * K, Group::kEp);
  comm_.allgather(p, p_all_, 4 * T * K, Group::kEp);
  // The blocks of this rank's experts in each source's send order; their host copy is the one
  // device-to-host copy of the dispatch (none in a sync-free step).
  blocks_.plan(counts_all_, E, ep_rank_ * d_.E_local);
  timer_.end(phases_.counts_exchange);
  ops_.expert_major_positions(d_, send_pos_all_, blocks_.starts(0), blocks_.dest(0), pos_);
}

void AllgatherDispatcher::dispatch_fwd(const void* x, void* xe) {
  timer_.begin(phases_.a2a_dispatch_fwd);
  comm_.allgather(x, rows_all_, dispatched_row_bytes() * size_t(d_.T), Group::kEp);
  timer_.end(phases_.a2a_dispatch_fwd);
  ops_.permute(dispatched_rows(dg_, device_.storage_bytes()), rows_all_, pos_, xe);
  blocks_.zero_padding(xe, dispatched_);
}

void AllgatherDispatcher::combine_fwd(const void* ye, const float* /*p: layout()'s copy*/,
                                      void* out) {
  ye_used_ = ye;
  ops_.combine_fwd_f32(dg_, ye, pos_, p_all_, partial_);
  timer_.begin(phases_.a2a_combine_fwd);
  comm_.reduce_scatter(partial_, out_f32_, size_t(d_.T * d_.H), DType::kFp32, Group::kEp);
  timer_.end(phases_.a2a_combine_fwd);
  ops_.to_storage(d_, out_f32_, d_.T * d_.H, out);
}

void AllgatherDispatcher::combine_bwd(const void* dout, const float* /*p: layout()'s copy*/,
                                      void* dye, float* dp) {
  MOE_CHECK(ye_used_, "combine_bwd before combine_fwd");
  // dout lands where x did: the forward's permute has read x already.
  timer_.begin(phases_.a2a_combine_bwd);
  comm_.allgather(dout, rows_all_, device_.storage_bytes() * d_.T * d_.H, Group::kEp);
  timer_.end(phases_.a2a_combine_bwd);
  ops_.combine_bwd(dg_, rows_all_, ye_used_, pos_, p_all_, dye, dp_all_);
  comm_.reduce_scatter(dp_all_, dp, size_t(d_.T * d_.K), DType::kFp32, Group::kEp);
  blocks_.zero_padding(dye, d_);
}

void AllgatherDispatcher::dispatch_bwd(const void* dxe, float* dx_acc) {
  // The partial sums reuse the combine's buffer, free since its reduce-scatter.
  ops_.unpermute_sum(dg_, dxe, pos_, partial_);
  timer_.begin(phases_.a2a_dispatch_bwd);
  comm_.reduce_scatter(partial_, dx_acc, size_t(d_.T * d_.H), DType::kFp32, Group::kEp);
  timer_.end(phases_.a2a_dispatch_bwd);
}

StepTraffic AllgatherDispatcher::traffic() {
  StepTraffic t;
  t.rows_received = blocks_.rows_received();
  t.rows_padded = blocks_.rows_padded();
  device_.copy_to_host(counts_host_.data(), counts_, 4 * counts_host_.size());
  int64_t rows_kept = 0;
  for (int32_t c : counts_host_) rows_kept += c;
  t.rows_dropped = d_.T * d_.K - rows_kept;
  // Each collective sends this rank's chunk (all-gather) or the other ranks' chunks of its
  // partial sums (reduce-scatter) to the ep - 1 other ranks, whatever the routing.
  const double others = double(d_.ep - 1), chunk = others * double(d_.T) * double(d_.H);
  t.rows_to_others = (d_.ep - 1) * d_.T;
  t.bytes_to_others[kDirDispatchFwd] = others * double(d_.T) * double(dispatched_row_bytes());
  t.bytes_to_others[kDirCombineBwd] = chunk * double(device_.storage_bytes());
  t.bytes_to_others[kDirCombineFwd] = t.bytes_to_others[kDirDispatchBwd] = chunk * 4;
  return t;
}

// Whatever the routing: the all-gathers' outputs hold every rank's T rows (storage), the
// reduce-scatters' inputs every rank's T rows of fp32 partial sums; the layout gathers counts [E],
// send positions and p [T, K]; dp's reduce-scatter [T, K] fp32 follows the combine's backward.
DispatchBytes AllgatherDispatcher::bytes_for_rows(const Workload& w, const Mesh& mesh,
                                                  size_t storage_bytes, double) {
  DispatchBytes b;
  const double ep = double(mesh.ep), T = double(w.tokens_per_rank), H = double(w.model.hidden),
               K = double(w.model.topk), E = double(w.model.experts);
  b.direction[kDirDispatchFwd] = ep * T * double(dispatch_row_bytes(w, storage_bytes));
  b.direction[kDirCombineBwd] = ep * T * H * double(storage_bytes);
  b.direction[kDirCombineFwd] = b.direction[kDirDispatchBwd] = ep * T * H * 4;
  b.layout = ep * (E + 2 * T * K) * 4;
  b.other = ep * T * K * 4;
  b.collectives_per_step = kNumDirs + 1;
  b.rows_per_token_to_others = ep - 1;
  return b;
}

// As the constructor allocates: the rank's layout, the positions, the blocks (offsets and
// table), the gathered routing, rows, partial sums, out's sums and dp's partial values.
int64_t AllgatherDispatcher::buffer_bytes(const Workload& w, int64_t storage_bytes) {
  const int64_t T = w.tokens_per_rank, K = w.model.topk, H = w.model.hidden, S = storage_bytes;
  const int64_t E = w.model.experts, ep = w.mesh.ep, E_local = E / ep;
  return saturating_sum(
      {saturating_product({4, saturating_sum({E, T * K, saturating_product({ep, T, K})})}),
       ExpertBlocks::device_bytes(ep, E_local), 4 * ep * E, saturating_product({3 * 4, ep, T, K}),
       saturating_product({S, ep, T, H}), saturating_product({4, ep, T, H}),
       saturating_product({4, T, H})});
}

}  // namespace moe
