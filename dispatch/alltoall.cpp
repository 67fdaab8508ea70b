#include "dispatch/alltoall.h"

#include <algorithm>

#include "core/buffer_plan.h"
#include "core/error.h"
#include "core/layout.h"
#include "core/saturating.h"

namespace moe {
namespace {

// The send order (rows by destination rank, then by expert) is row for row the experts' input
// order at ep 1 (one rank) with align 1 (no padding rows): then there are no send-order buffers
// and no regroup copies.
bool send_order_is_expert_major(int64_t ep, int64_t align) { return ep == 1 && align == 1; }
// At ep 1 with padding the rows go straight to their padded expert-major places instead (no
// send-order buffers either): two regroup copies of every row saved.
bool places_rows(int64_t ep, int64_t align) { return ep == 1 && align > 1; }
// The counts' ints: this rank's rows per expert [E], then the EP group's rows for this rank's
// experts [ep, E_local], except at ep 1, where those are this rank's own (no second array).
int64_t counts_ints(int64_t E, int64_t ep, int64_t E_local) {
  return ep == 1 ? E : E + ep * E_local;
}

}  // namespace

AlltoallDispatcher::AlltoallDispatcher(const Dims& d, const Mesh& mesh, Device& device, Ops& ops,
                                       Comm& comm, PhaseTimer& timer, const DispatchPhases& phases)
    : DispatcherBase(d, mesh, device, ops, comm, timer, phases) {
  const int64_t T = d_.T, H = d_.H, E = d_.E, K = d_.K, El = d_.E_local;
  MOE_CHECK(!d_.sync_free || d_.ep == 1,
            "dispatch alltoall is sync-free at ep 1 only (validation refuses the rest)");
  const size_t sb = device.storage_bytes();
  send_pos_ = buffers_.alloc<int32_t>(4 * T * K);
  expert_counts_ = buffers_.alloc<int32_t>(4 * counts_ints(E, d_.ep, El));
  // Where the counts received start in the counts' ints, on the device and on the host: at ep 1
  // they are this rank's own (the same ints, and no exchange).
  const int64_t recv_at = d_.ep == 1 ? 0 : E;
  recv_counts_ = expert_counts_ + recv_at;
  offsets_dev_ = buffers_.alloc<int64_t>(8 * (El + 1));
  rows_bound_ = expert_rows_bound(d_.ep, T, K, El, d_.align);
  send_is_expert_major_ = send_order_is_expert_major(d_.ep, d_.align);
  row_pos_ = send_pos_;
  if (places_rows(d_.ep, d_.align)) {
    pos_ = buffers_.alloc<int32_t>(4 * T * K);
    row_pos_ = pos_;
    local_blocks_ = std::make_unique<ExpertBlocks>(d, device, ops, buffers_, rows_bound_);
  } else if (!send_is_expert_major_) {
    send_ = buffers_.alloc(sb * T * K * H);
    y_send_ = buffers_.alloc(sb * T * K * H);
    dy_send_ = buffers_.alloc(sb * T * K * H);
  }
  counts_host_.resize(counts_ints(E, d_.ep, El));
  expert_counts_host_ = counts_host_.data();
  recv_counts_host_ = counts_host_.data() + recv_at;
  send_rows_.resize(d_.ep);
  recv_rows_.resize(d_.ep);
  row_offsets_.assign(El + 1, 0);
}

void AlltoallDispatcher::layout(const int32_t* idx, const float* p) {
  ops_.dispatch_layout(d_, idx, p, expert_counts_, send_pos_);
  timer_.begin(phases_.counts_exchange);
  // Experts of EP rank r are [r*E_local, (r+1)*E_local): each rank's slice of expert_counts is
  // contiguous, so one fixed-size all-to-all gives recv_counts [ep, E_local].
  if (d_.ep > 1) comm_.alltoall_i32(expert_counts_, recv_counts_, d_.E_local, Group::kEp);
  if (local_blocks_) {
    // The blocks' host copy is the one device-to-host copy (none in a sync-free step).
    local_blocks_->plan(recv_counts_, d_.E_local, 0);
    timer_.end(phases_.counts_exchange);
    ops_.expert_major_positions(d_, send_pos_, local_blocks_->starts(0), local_blocks_->dest(0),
                                pos_);
    return;
  }
  // The one device-to-host copy of the dispatch, where host-driven collectives need the split
  // sizes; a sync-free step leaves the counts where they are until traffic().
  if (!d_.sync_free)
    device_.copy_to_host(counts_host_.data(), expert_counts_, 4 * counts_host_.size());
  timer_.end(phases_.counts_exchange);
  ops_.expert_offsets(d_, recv_counts_, d_.E_local, offsets_dev_);
  if (d_.sync_free)
    host_stale_ = true;
  else
    plan_on_host();
}

void AlltoallDispatcher::plan_on_host() {
  const int64_t El = d_.E_local;
  rows_received_ = 0;
  for (int64_t r = 0; r < d_.ep; ++r) {
    send_rows_[r] = recv_rows_[r] = 0;
    for (int64_t l = 0; l < El; ++l) {
      send_rows_[r] += expert_counts_host_[r * El + l];
      recv_rows_[r] += recv_counts_host_[r * El + l];
    }
    rows_received_ += recv_rows_[r];
  }
  // The expert-major layout the regroup writes: blocks padded to multiples of align, as the
  // device offsets have it; the host's for the per-expert GEMMs and the buffer sizes.
  expert_major_offsets(recv_counts_host_, d_.ep, El, d_.align, row_offsets_.data());
  const size_t landing = device_.storage_bytes() * size_t(row_offsets_[El]) * size_t(d_.H);
  if (d_.ep > 1) recv_.at_least(landing, size_t(grown_bytes(int64_t(landing))));
}

ExpertOffsets AlltoallDispatcher::expert_offsets() const {
  if (local_blocks_) return local_blocks_->offsets();
  if (d_.sync_free) return {offsets_dev_, nullptr, rows_bound_};
  return {offsets_dev_, row_offsets_.data(), row_offsets_[d_.E_local]};
}

ChunkRows AlltoallDispatcher::rows_by_source() const {
  return {recv_counts_, d_.E_local, local_blocks_ ? local_blocks_->offsets().device : offsets_dev_,
          0};
}

int64_t AlltoallDispatcher::received_bound() const {
  return d_.sync_free ? d_.ep * d_.T * d_.K : rows_received_;
}

void AlltoallDispatcher::dispatch_fwd(const void* x, void* xe) {
  void* x_send = direct() ? xe : send_;
  ops_.permute(dispatched_, x, row_pos_, x_send);
  if (!direct()) to_expert_major(dispatched_, x_send, xe, phases_.a2a_dispatch_fwd);
  if (local_blocks_) local_blocks_->zero_padding(xe, dispatched_);
}

void AlltoallDispatcher::combine_fwd(const void* ye, const float* p, void* out) {
  const void* y_send = ye;
  if (!direct()) {
    to_send_order(ye, y_send_, phases_.a2a_combine_fwd);
    y_send = y_send_;
  }
  ops_.combine_fwd(d_, y_send, row_pos_, p, out);
  y_send_used_ = y_send;
}

void AlltoallDispatcher::combine_bwd(const void* dout, const float* p, void* dye, float* dp) {
  MOE_CHECK(y_send_used_, "combine_bwd before combine_fwd");
  void* dy_send = direct() ? dye : dy_send_;
  ops_.combine_bwd(d_, dout, y_send_used_, row_pos_, p, dy_send, dp);
  if (!direct()) to_expert_major(d_, dy_send, dye, phases_.a2a_combine_bwd);
  if (local_blocks_) local_blocks_->zero_padding(dye, d_);
}

void AlltoallDispatcher::dispatch_bwd(const void* dxe, float* dx_acc) {
  // dx returns through x's send buffer, free since the forward's all-to-all.
  const void* dx_send = dxe;
  if (!direct()) {
    to_send_order(dxe, send_, phases_.a2a_dispatch_bwd);
    dx_send = send_;
  }
  ops_.unpermute_sum(d_, dx_send, row_pos_, dx_acc);
}

// At ep 1 the all-to-all would copy the send buffer to itself in the same order: the regroup
// reads or writes the send buffer directly, and the a2a_* phase is not run (0 ms).
void AlltoallDispatcher::to_expert_major(const Dims& rows, const void* send_order,
                                         void* expert_major, int phase_a2a) {
  const void* src = send_order;
  if (d_.ep > 1) {
    timer_.begin(phase_a2a);
    comm_.alltoallv_rows(send_order, send_rows_.data(), recv_.ptr(), recv_rows_.data(),
                         device_.storage_bytes() * rows.H, Group::kEp);
    timer_.end(phase_a2a);
    src = recv_.ptr();
  }
  ops_.regroup(rows, src, recv_counts_, received_bound(), true, expert_major);
}

void AlltoallDispatcher::to_send_order(const void* expert_major, void* send_order, int phase_a2a) {
  void* rank_major = d_.ep > 1 ? recv_.ptr() : send_order;
  ops_.regroup(d_, expert_major, recv_counts_, received_bound(), false, rank_major);
  if (d_.ep == 1) return;
  timer_.begin(phase_a2a);
  comm_.alltoallv_rows(recv_.ptr(), recv_rows_.data(), send_order, send_rows_.data(),
                       device_.storage_bytes() * d_.H, Group::kEp);
  timer_.end(phase_a2a);
}

StepTraffic AlltoallDispatcher::traffic() {
  if (local_blocks_) {
    // ep 1: every kept row stays on the rank.
    StepTraffic t;
    t.rows_received = local_blocks_->rows_received();
    t.rows_padded = local_blocks_->rows_padded();
    t.rows_dropped = d_.T * d_.K - t.rows_received;
    return t;
  }
  if (host_stale_) {
    device_.copy_to_host(counts_host_.data(), expert_counts_, 4 * counts_host_.size());
    host_stale_ = false;
    plan_on_host();
  }
  StepTraffic t;
  int64_t rows_sent = 0;
  for (int64_t r = 0; r < d_.ep; ++r) rows_sent += send_rows_[r];
  t.rows_to_others = rows_sent - send_rows_[ep_rank_];
  t.rows_received = rows_received_;
  t.rows_dropped = d_.T * d_.K - rows_sent;
  t.rows_padded = row_offsets_[d_.E_local] - rows_received_;
  // The dispatch direction sends this rank's routed rows; the combine direction returns the rows
  // its experts received.
  const double row = double(device_.storage_bytes()) * double(d_.H);
  const double returned = double(rows_received_ - recv_rows_[ep_rank_]);
  t.bytes_to_others[kDirDispatchFwd] = double(t.rows_to_others) * double(dispatched_row_bytes());
  t.bytes_to_others[kDirCombineBwd] = double(t.rows_to_others) * row;
  t.bytes_to_others[kDirCombineFwd] = t.bytes_to_others[kDirDispatchBwd] = returned * row;
  return t;
}

// Each rank sends its routed rows, one per (token, expert), and gets as many back (balanced), per
// direction; 1/ep of them stay on the rank. At ep 1 no all-to-all runs. The layout exchanges the
// counts per expert (an all-to-all of E int32, at ep 1 too).
DispatchBytes AlltoallDispatcher::bytes_for_rows(const Workload& w, const Mesh& mesh,
                                                 size_t storage_bytes, double rows_per_rank) {
  DispatchBytes b;
  b.layout = 4.0 * double(w.model.experts);
  if (mesh.ep == 1) return b;
  for (double& d : b.direction) d = rows_per_rank * double(w.model.hidden) * double(storage_bytes);
  b.direction[kDirDispatchFwd] = rows_per_rank * double(dispatch_row_bytes(w, storage_bytes));
  b.collectives_per_step = 4;
  b.rows_per_token_to_others =
      rows_per_rank / double(w.tokens_per_rank) * double(mesh.ep - 1) / double(mesh.ep);
  return b;
}

// As the constructor and layout() allocate: send positions, the counts and the device offsets;
// send-order x, y and dy, except where the send order is the expert-major order (they are the
// caller's buffers then); the all-to-all's landing buffer where there is one, grown for the
// expert-major rows of balanced routing plus the align padding.
int64_t AlltoallDispatcher::buffer_bytes(const Workload& w, int64_t storage_bytes) {
  const int64_t T = w.tokens_per_rank, K = w.model.topk, H = w.model.hidden, S = storage_bytes;
  const int64_t E = w.model.experts, E_local = E / w.mesh.ep;
  const int64_t rows = saturating_sum({saturating_product({T, K}), E_local * (w.align - 1)});
  int64_t bytes = saturating_sum(
      {saturating_product({4, T, K}), 4 * counts_ints(E, w.mesh.ep, E_local), 8 * (E_local + 1)});
  if (places_rows(w.mesh.ep, w.align))
    bytes = saturating_sum(
        {bytes, saturating_product({4, T, K}), ExpertBlocks::device_bytes(1, E_local)});
  else if (!send_order_is_expert_major(w.mesh.ep, w.align))
    bytes = saturating_sum({bytes, saturating_product({3, T, K, H, S})});
  if (w.mesh.ep > 1) bytes = saturating_sum({bytes, grown_bytes(saturating_product({rows, H, S}))});
  return bytes;
}

}  // namespace moe
