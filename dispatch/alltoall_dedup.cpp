#include "dispatch/alltoall_dedup.h"

#include <algorithm>
#include <cmath>

#include "core/buffer_plan.h"
#include "core/error.h"
#include "core/saturating.h"
#include "dispatch/ranks_per_token.h"

namespace moe {
namespace {

// Bytes of one wire row's metadata: K int32 slots and K fp32 weights.
int64_t meta_bytes(int64_t K) { return 8 * K; }

// Bytes a received wire row holds on its rank: the row [H] storage, and [K] each of slots,
// weights, expert-major positions and dp.
int64_t received_row_bytes(int64_t H, int64_t K, int64_t storage_bytes) {
  return H * storage_bytes + 4 * 4 * K;
}

// Growth leaves a quarter of headroom, as the other ragged buffers' (core/buffer_plan.h).
int64_t grown_rows(int64_t rows) { return std::max<int64_t>(1, rows + rows / 4); }

}  // namespace

AlltoallDedupDispatcher::AlltoallDedupDispatcher(const Dims& d, const Mesh& mesh, Device& device,
                                                 Ops& ops, Comm& comm, PhaseTimer& timer,
                                                 const DispatchPhases& phases, int64_t planned_rows)
    : DispatcherBase(d, mesh, device, ops, comm, timer, phases) {
  MOE_CHECK(d_.ep > 1, "dispatch " << name() << " at ep 1: make_dispatcher builds alltoall's");
  const int64_t T = d_.T, H = d_.H, E = d_.E, K = d_.K, El = d_.E_local, ep = d_.ep;
  check_int32_positions("lower tokens_per_rank or use dispatch = alltoall");
  const int64_t wire_max = T * std::min(K, ep);
  send_pos_ = buffers_.alloc<int32_t>(4 * T * K);
  counts_host_.resize(E + ep * El + 2 * ep);
  counts_ = buffers_.alloc<int32_t>(4 * counts_host_.size());
  recv_counts_ = counts_ + E;
  wire_counts_ = recv_counts_ + ep * El;
  wire_recv_ = wire_counts_ + ep;
  recv_counts_host_ = counts_host_.data() + E;
  wire_counts_host_ = recv_counts_host_ + ep * El;
  wire_recv_host_ = wire_counts_host_ + ep;
  wire_pos_ = buffers_.alloc<int32_t>(4 * T * ep);
  wire_ = buffers_.alloc(device.storage_bytes() * wire_max * H);
  slots_ = buffers_.alloc<int32_t>(4 * wire_max * K);
  weights_ = buffers_.alloc<float>(4 * wire_max * K);
  dp_wire_ = buffers_.alloc<float>(4 * wire_max * K);
  blocks_ = std::make_unique<ExpertBlocks>(d, device, ops, buffers_,
                                           expert_rows_bound(ep, T, K, El, d_.align));
  send_rows_.resize(ep);
  recv_rows_.resize(ep);
  recv_first_.assign(ep + 1, 0);
  hold_received(grown_rows(planned_rows));
}

AlltoallDedupDispatcher::~AlltoallDedupDispatcher() { release_received(); }

void AlltoallDedupDispatcher::hold_received(int64_t rows) {
  const size_t R = size_t(rows), K = size_t(d_.K);
  recv_ = device_.alloc(device_.storage_bytes() * R * size_t(d_.H));
  recv_slots_ = static_cast<int32_t*>(device_.alloc(4 * R * K));
  recv_weights_ = static_cast<float*>(device_.alloc(4 * R * K));
  pos_ = static_cast<int32_t*>(device_.alloc(4 * R * K));
  recv_dp_ = static_cast<float*>(device_.alloc(4 * R * K));
  received_rows_ = rows;
}

void AlltoallDedupDispatcher::release_received() {
  for (void* p : {recv_, static_cast<void*>(recv_slots_), static_cast<void*>(recv_weights_),
                  static_cast<void*>(pos_), static_cast<void*>(recv_dp_)})
    device_.release(p);
  received_rows_ = 0;
}

ChunkRows AlltoallDedupDispatcher::rows_by_source() const {
  return {recv_counts_, d_.E_local, blocks_->offsets().device, 0};
}

void AlltoallDedupDispatcher::layout(const int32_t* idx, const float* p) {
  const int64_t E = d_.E, El = d_.E_local, ep = d_.ep;
  ops_.dispatch_layout(d_, idx, p, counts_, send_pos_);
  ops_.dedup_layout(d_, idx, p, counts_, send_pos_, wire_pos_, wire_counts_, slots_, weights_);
  timer_.begin(phases_.counts_exchange);
  // Experts of EP rank r are [r*E_local, (r+1)*E_local): each rank's slice of the counts is
  // contiguous, so one fixed-size all-to-all gives what arrives [ep, E_local]; another the wire
  // rows.
  comm_.alltoall_i32(counts_, recv_counts_, El, Group::kEp);
  comm_.alltoall_i32(wire_counts_, wire_recv_, 1, Group::kEp);
  // The one device-to-host copy of the dispatch: host-driven collectives need the split sizes.
  device_.copy_to_host(counts_host_.data(), counts_, 4 * counts_host_.size());
  timer_.end(phases_.counts_exchange);

  rows_kept_ = 0;
  for (int64_t e = 0; e < E; ++e) rows_kept_ += counts_host_[e];
  for (int64_t r = 0; r < ep; ++r) {
    send_rows_[r] = wire_counts_host_[r];
    recv_rows_[r] = wire_recv_host_[r];
    recv_first_[r + 1] = recv_first_[r] + recv_rows_[r];
  }
  // A source's slots count from the first row it sends this rank: its blocks start at 0.
  blocks_->plan(recv_counts_, El, 0);
  if (recv_first_[ep] > received_rows_) {
    release_received();
    hold_received(grown_rows(recv_first_[ep]));
  }
}

// The rows that arrived at this rank, one per (token, source rank), as Dims for the ops.
Dims AlltoallDedupDispatcher::received(const Dims& rows) const {
  Dims r = rows;
  r.T = recv_first_[d_.ep];
  return r;
}

// This rank's tokens, one wire row per (t, destination rank): the K of the ops is ep.
Dims AlltoallDedupDispatcher::to_wire(const Dims& rows) const {
  Dims w = rows;
  w.K = d_.ep;
  return w;
}

void AlltoallDedupDispatcher::to_experts(const void* send, void* recv, size_t row_bytes) {
  comm_.alltoallv_rows(send, send_rows_.data(), recv, recv_rows_.data(), row_bytes, Group::kEp);
}

void AlltoallDedupDispatcher::to_tokens(const void* send, void* recv, size_t row_bytes) {
  comm_.alltoallv_rows(send, recv_rows_.data(), recv, send_rows_.data(), row_bytes, Group::kEp);
}

void AlltoallDedupDispatcher::dispatch_fwd(const void* x, void* xe) {
  const size_t meta = 4 * size_t(d_.K);
  ops_.permute(to_wire(dispatched_), x, wire_pos_, wire_);
  timer_.begin(phases_.a2a_dispatch_fwd);
  to_experts(wire_, recv_, dispatched_row_bytes());
  to_experts(slots_, recv_slots_, meta);
  to_experts(weights_, recv_weights_, meta);
  timer_.end(phases_.a2a_dispatch_fwd);
  // Each source's slots against its own blocks' starts: one call per source, whose rows are
  // contiguous among those received.
  for (int64_t s = 0; s < d_.ep; ++s) {
    Dims from = d_;
    from.ep = 1;
    from.T = recv_rows_[s];
    const int64_t first = recv_first_[s] * d_.K;
    ops_.expert_major_positions(from, recv_slots_ + first, blocks_->starts(s), blocks_->dest(s),
                                pos_ + first);
  }
  ops_.permute(received(dispatched_), recv_, pos_, xe);
  blocks_->zero_padding(xe, dispatched_);
}

void AlltoallDedupDispatcher::combine_fwd(const void* ye, const float* /*p: layout()'s copy*/,
                                          void* out) {
  ye_used_ = ye;
  // Each wire row's local expert outputs weighted by p, summed in fp32, stored: the partial sums
  // reuse the received rows' buffer, whose x the forward's permute has read.
  ops_.combine_fwd(received(d_), ye, pos_, recv_weights_, recv_);
  timer_.begin(phases_.a2a_combine_fwd);
  to_tokens(recv_, wire_, device_.storage_bytes() * d_.H);
  timer_.end(phases_.a2a_combine_fwd);
  ops_.unpermute_sum_storage(to_wire(d_), wire_, wire_pos_, out);
}

void AlltoallDedupDispatcher::combine_bwd(const void* dout, const float* /*p: layout()'s copy*/,
                                          void* dye, float* dp) {
  MOE_CHECK(ye_used_, "combine_bwd before combine_fwd");
  ops_.permute(to_wire(d_), dout, wire_pos_, wire_);
  timer_.begin(phases_.a2a_combine_bwd);
  to_experts(wire_, recv_, device_.storage_bytes() * d_.H);
  timer_.end(phases_.a2a_combine_bwd);
  ops_.combine_bwd(received(d_), recv_, ye_used_, pos_, recv_weights_, dye, recv_dp_);
  blocks_->zero_padding(dye, d_);
  // dp back to the tokens' ranks, where each (t, k) gets its one rank's value (the others' slots
  // hold zeros): a sum of rows K fp32 wide.
  to_tokens(recv_dp_, dp_wire_, 4 * size_t(d_.K));
  Dims dp_rows = to_wire(d_);
  dp_rows.H = d_.K;
  dp_rows.dtype = DType::kFp32;
  ops_.unpermute_sum(dp_rows, dp_wire_, wire_pos_, dp);
}

void AlltoallDedupDispatcher::dispatch_bwd(const void* dxe, float* dx_acc) {
  // The partial sums reuse the received rows' buffer, whose dout the combine's backward has read.
  ops_.unpermute_sum_storage(received(d_), dxe, pos_, recv_);
  timer_.begin(phases_.a2a_dispatch_bwd);
  to_tokens(recv_, wire_, device_.storage_bytes() * d_.H);
  timer_.end(phases_.a2a_dispatch_bwd);
  ops_.unpermute_sum(to_wire(d_), wire_, wire_pos_, dx_acc);
}

StepTraffic AlltoallDedupDispatcher::traffic() {
  StepTraffic t;
  int64_t wire_rows = 0;
  for (int64_t r = 0; r < d_.ep; ++r) wire_rows += send_rows_[r];
  t.rows_to_others = wire_rows - send_rows_[ep_rank_];
  t.rows_received = blocks_->rows_received();
  t.rows_dropped = d_.T * d_.K - rows_kept_;
  t.rows_padded = blocks_->rows_padded();
  // The dispatch direction sends this rank's wire rows (and their metadata); the combine
  // direction returns one row for each wire row that reached this rank.
  const double row = double(device_.storage_bytes()) * double(d_.H);
  const double returned = double(recv_first_[d_.ep] - recv_rows_[ep_rank_]);
  t.bytes_to_others[kDirDispatchFwd] =
      double(t.rows_to_others) * (double(dispatched_row_bytes()) + double(meta_bytes(d_.K)));
  t.bytes_to_others[kDirCombineBwd] = double(t.rows_to_others) * row;
  t.bytes_to_others[kDirCombineFwd] = t.bytes_to_others[kDirDispatchBwd] = returned * row;
  return t;
}

int64_t AlltoallDedupDispatcher::planned_received_rows(const Workload& w) {
  return int64_t(std::ceil(double(w.tokens_per_rank) * ranks_per_token(w, w.mesh.ep)));
}

// Each rank sends one wire row per (token, rank reached) and, balanced, receives as many, per
// direction; 1/ep of them stay on the rank. The dispatch direction carries each row's metadata
// too, and dp returns K fp32 per wire row after the combine's backward (other). The layout
// exchanges the counts per expert and the wire rows per rank.
DispatchBytes AlltoallDedupDispatcher::bytes_for_rows(const Workload& w, const Mesh& mesh,
                                                      size_t storage_bytes, double rows_per_rank) {
  const double T = double(w.tokens_per_rank), K = double(w.model.topk), ep = double(mesh.ep);
  const double wire = wire_rows_per_rank(w, mesh.ep, rows_per_rank);
  const double row = double(w.model.hidden) * double(storage_bytes);
  DispatchBytes b;
  b.layout = 4.0 * (double(w.model.experts) + ep);
  b.direction[kDirDispatchFwd] =
      wire * (double(dispatch_row_bytes(w, storage_bytes)) + double(meta_bytes(w.model.topk)));
  b.direction[kDirCombineFwd] = b.direction[kDirCombineBwd] = b.direction[kDirDispatchBwd] =
      wire * row;
  b.other = wire * K * 4;
  // The dispatch direction's three all-to-alls (rows, slots, weights), one in each other
  // direction, and dp's.
  b.collectives_per_step = kNumDirs + 3;
  b.rows_per_token_to_others = wire / T * (ep - 1) / ep;
  return b;
}

// As the constructor allocates: send positions, the counts, the wire rows' places, the send
// side's rows, slots, weights and dp for T * min(K, ep) wire rows, the blocks' table (and a zero
// row), and the receiving side grown for the planned rows.
int64_t AlltoallDedupDispatcher::buffer_bytes(const Workload& w, int64_t storage_bytes) {
  const int64_t ep = w.mesh.ep;
  const int64_t T = w.tokens_per_rank, K = w.model.topk, H = w.model.hidden, S = storage_bytes;
  const int64_t E = w.model.experts, E_local = E / ep, wire_max = T * std::min(K, ep);
  int64_t bytes =
      saturating_product({4, saturating_sum({T * K, E + ep * E_local + 2 * ep, T * ep})});
  bytes = saturating_sum(
      {bytes, ExpertBlocks::device_bytes(ep, E_local),
       saturating_product({wire_max, saturating_sum({H * S, 3 * 4 * K})}),
       saturating_product({grown_rows(planned_received_rows(w)), received_row_bytes(H, K, S)})});
  return bytes;
}

}  // namespace moe
