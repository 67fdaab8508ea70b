#include "dispatch/nvlink.h"

#include <algorithm>

#include "core/buffer_plan.h"
#include "core/error.h"
#include "core/saturating.h"
#include "dispatch/alltoall_dedup.h"
#include "dispatch/ranks_per_token.h"

namespace moe {
namespace {

// Regions start on 256-byte boundaries: the row moves take 16 bytes at a time where rows allow.
size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Rows a rank sends at most, one per (token, rank reached).
int64_t wire_max(const Dims& d) { return d.T * std::min(d.K, d.ep); }

}  // namespace

NvlinkDispatcher::Window NvlinkDispatcher::window_layout(const Dims& d, size_t storage_bytes) {
  const size_t T = size_t(d.T), K = size_t(d.K), ep = size_t(d.ep), E = size_t(d.E);
  const size_t row = storage_bytes * size_t(d.H);
  const size_t landing = std::max(row, dispatch_row_bytes(d.H, d.dispatch_fp8, storage_bytes));
  Window w;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t here = at;
    at += aligned(bytes);
    return here;
  };
  w.counts = take(4 * ep * (E + ep));
  w.send_pos = take(4 * ep * T * K);
  w.p = take(4 * ep * T * K);
  w.wire_pos = take(4 * ep * T * ep);
  w.rows = take(landing * ep * T);
  w.returned = take(row * size_t(wire_max(d)));
  w.dp = take(4 * K * size_t(wire_max(d)));
  w.bytes = at;
  return w;
}

NvlinkDispatcher::NvlinkDispatcher(const Dims& d, const Mesh& mesh, Device& device, Ops& ops,
                                   Comm& comm, PhaseTimer& timer, const DispatchPhases& phases)
    : DispatcherBase(d, mesh, device, ops, comm, timer, phases), dg_(d) {
  MOE_CHECK(d_.ep > 1, "dispatch " << name() << " at ep 1: make_dispatcher builds alltoall's");
  const int64_t T = d_.T, H = d_.H, E = d_.E, K = d_.K, El = d_.E_local, ep = d_.ep;
  dg_.T = ep * T;
  check_int32_positions("lower tokens_per_rank");
  const size_t sb = device.storage_bytes();
  at_ = window_layout(d_, sb);
  window_ = comm.open_window(at_.bytes, Group::kEp);
  MOE_CHECK(window_->ranks() == ep && window_->rank() == ep_rank_,
            "window of " << window_->ranks() << " ranks (this one " << window_->rank()
                         << ") for EP rank " << ep_rank_ << " of " << ep);
  counts_ = buffers_.alloc<int32_t>(4 * (E + ep));
  send_pos_ = buffers_.alloc<int32_t>(4 * T * K);
  wire_pos_ = buffers_.alloc<int32_t>(4 * T * ep);
  slots_ = buffers_.alloc<int32_t>(4 * wire_max(d_) * K);
  weights_ = buffers_.alloc<float>(4 * wire_max(d_) * K);
  pos_ = buffers_.alloc<int32_t>(4 * ep * T * K);
  partial_ = buffers_.alloc(sb * ep * T * H);
  dp_all_ = buffers_.alloc<float>(4 * ep * T * K);
  blocks_ = std::make_unique<ExpertBlocks>(d, device, ops, buffers_,
                                           expert_rows_bound(ep, T, K, El, d_.align));
  counts_host_.resize(ep * (E + ep));
}

ChunkRows NvlinkDispatcher::rows_by_source() const {
  return {mine<int32_t>(at_.counts) + ep_rank_ * d_.E_local, d_.E + d_.ep,
          blocks_->offsets().device, 0};
}

RankBases NvlinkDispatcher::at(size_t offset) const {
  RankBases b;
  for (int r = 0; r < window_->ranks(); ++r)
    b.at[r] = static_cast<char*>(window_->peer(r)) + offset;
  return b;
}

// This rank's tokens, one wire row per (t, destination rank): the K of the ops is ep.
Dims NvlinkDispatcher::to_wire(const Dims& rows) const {
  Dims w = rows;
  w.K = d_.ep;
  return w;
}

void NvlinkDispatcher::layout(const int32_t* idx, const float* p) {
  const int64_t T = d_.T, E = d_.E, K = d_.K, ep = d_.ep;
  ops_.dispatch_layout(d_, idx, p, counts_, send_pos_);
  ops_.dedup_layout(d_, idx, p, counts_, send_pos_, wire_pos_, counts_ + E, slots_, weights_);
  timer_.begin(phases_.counts_exchange);
  // Every rank's metadata lands in slot ep_rank_ of each region of every window.
  const size_t me = size_t(ep_rank_), counts = 4 * size_t(E + ep), rows = 4 * size_t(T * K),
               wire = 4 * size_t(T * ep);
  for (int r = 0; r < ep; ++r) {
    window_->put(r, at_.counts + me * counts, counts_, counts);
    window_->put(r, at_.send_pos + me * rows, send_pos_, rows);
    window_->put(r, at_.p + me * rows, p, rows);
    window_->put(r, at_.wire_pos + me * wire, wire_pos_, wire);
  }
  window_->barrier();
  // The blocks of this rank's experts in each source's send order; their host copy is the one
  // device-to-host copy of the dispatch (none in a sync-free step).
  blocks_->plan(mine<int32_t>(at_.counts), E + ep, ep_rank_ * d_.E_local);
  timer_.end(phases_.counts_exchange);
  ops_.expert_major_positions(d_, mine<int32_t>(at_.send_pos), blocks_->starts(0), blocks_->dest(0),
                              pos_);
}

void NvlinkDispatcher::dispatch_fwd(const void* x, void* xe) {
  timer_.begin(phases_.a2a_dispatch_fwd);
  ops_.rows_to_ranks(d_, x, dispatched_row_bytes(), wire_pos_, ep_rank_ * d_.T, at(at_.rows));
  window_->barrier();
  timer_.end(phases_.a2a_dispatch_fwd);
  ops_.permute(dispatched_rows(dg_, device_.storage_bytes()), mine<void>(at_.rows), pos_, xe);
  blocks_->zero_padding(xe, dispatched_);
}

void NvlinkDispatcher::combine_fwd(const void* ye, const float* /*p: layout()'s copy*/, void* out) {
  ye_used_ = ye;
  const size_t row = device_.storage_bytes() * size_t(d_.H);
  ops_.combine_fwd(dg_, ye, pos_, mine<float>(at_.p), partial_);
  timer_.begin(phases_.a2a_combine_fwd);
  ops_.rows_to_sources(d_, partial_, row, mine<int32_t>(at_.wire_pos), ep_rank_, at(at_.returned));
  window_->barrier();
  timer_.end(phases_.a2a_combine_fwd);
  ops_.unpermute_sum_storage(to_wire(d_), mine<void>(at_.returned), wire_pos_, out);
}

void NvlinkDispatcher::combine_bwd(const void* dout, const float* /*p: layout()'s copy*/, void* dye,
                                   float* dp) {
  MOE_CHECK(ye_used_, "combine_bwd before combine_fwd");
  timer_.begin(phases_.a2a_combine_bwd);
  ops_.rows_to_ranks(d_, dout, device_.storage_bytes() * size_t(d_.H), wire_pos_, ep_rank_ * d_.T,
                     at(at_.rows));
  window_->barrier();
  timer_.end(phases_.a2a_combine_bwd);
  ops_.combine_bwd(dg_, mine<void>(at_.rows), ye_used_, pos_, mine<float>(at_.p), dye, dp_all_);
  blocks_->zero_padding(dye, d_);
  // dp back to the tokens' ranks, where each (t, k) gets its one rank's value (the others' rows
  // hold zeros there): a sum of rows K fp32 wide.
  ops_.rows_to_sources(d_, dp_all_, 4 * size_t(d_.K), mine<int32_t>(at_.wire_pos), ep_rank_,
                       at(at_.dp));
  window_->barrier();
  Dims dp_rows = to_wire(d_);
  dp_rows.H = d_.K;
  dp_rows.dtype = DType::kFp32;
  ops_.unpermute_sum(dp_rows, mine<float>(at_.dp), wire_pos_, dp);
}

void NvlinkDispatcher::dispatch_bwd(const void* dxe, float* dx_acc) {
  // The partial sums reuse out's buffer, which the combine's row moves have read.
  ops_.unpermute_sum_storage(dg_, dxe, pos_, partial_);
  timer_.begin(phases_.a2a_dispatch_bwd);
  ops_.rows_to_sources(d_, partial_, device_.storage_bytes() * size_t(d_.H),
                       mine<int32_t>(at_.wire_pos), ep_rank_, at(at_.returned));
  window_->barrier();
  timer_.end(phases_.a2a_dispatch_bwd);
  ops_.unpermute_sum(to_wire(d_), mine<void>(at_.returned), wire_pos_, dx_acc);
}

StepTraffic NvlinkDispatcher::traffic() {
  const int64_t E = d_.E, ep = d_.ep, me = ep_rank_;
  StepTraffic t;
  t.rows_received = blocks_->rows_received();
  t.rows_padded = blocks_->rows_padded();
  device_.copy_to_host(counts_host_.data(), mine<int32_t>(at_.counts), 4 * counts_host_.size());
  // Source s's counts per expert, then its wire rows to each rank.
  const auto wire_rows = [&](int64_t s, int64_t r) { return counts_host_[s * (E + ep) + E + r]; };
  int64_t kept = 0;
  for (int64_t e = 0; e < E; ++e) kept += counts_host_[me * (E + ep) + e];
  t.rows_dropped = d_.T * d_.K - kept;
  int64_t returned = 0;
  for (int64_t r = 0; r < ep; ++r) {
    if (r == me) continue;
    t.rows_to_others += wire_rows(me, r);
    returned += wire_rows(r, me);
  }
  const double row = double(device_.storage_bytes()) * double(d_.H);
  t.bytes_to_others[kDirDispatchFwd] = double(t.rows_to_others) * double(dispatched_row_bytes());
  t.bytes_to_others[kDirCombineBwd] = double(t.rows_to_others) * row;
  t.bytes_to_others[kDirCombineFwd] = t.bytes_to_others[kDirDispatchBwd] = double(returned) * row;
  return t;
}

// alltoall_dedup's wire rows in every direction and dp's rows back, without the slots and weights
// that its dispatch direction carries per row; the layout writes every rank's counts, wire rows
// per rank, send positions, p and wire_pos to every rank (an all-gather's output), and a barrier
// closes each of the six exchanges.
DispatchBytes NvlinkDispatcher::bytes_for_rows(const Workload& w, const Mesh& mesh,
                                               size_t storage_bytes, double rows_per_rank) {
  DispatchBytes b = AlltoallDedupDispatcher::bytes_for_rows(w, mesh, storage_bytes, rows_per_rank);
  const double T = double(w.tokens_per_rank), K = double(w.model.topk), ep = double(mesh.ep);
  b.direction[kDirDispatchFwd] =
      wire_rows_per_rank(w, mesh.ep, rows_per_rank) * double(dispatch_row_bytes(w, storage_bytes));
  b.layout = 4.0 * ep * (double(w.model.experts) + ep + 2 * T * K + T * ep);
  b.collectives_per_step = kNumDirs + 2;
  return b;
}

// As the constructor allocates: the rank's layout (counts, send positions, wire rows' places,
// dedup_layout's slots and weights), the group's positions, partial sums and dp, the blocks'
// table, and the window.
int64_t NvlinkDispatcher::buffer_bytes(const Workload& w, int64_t storage_bytes) {
  const int64_t ep = w.mesh.ep;
  const int64_t T = w.tokens_per_rank, K = w.model.topk, H = w.model.hidden, S = storage_bytes;
  const int64_t E = w.model.experts, E_local = E / ep;
  Dims d;
  d.T = T, d.H = H, d.E = E, d.K = K, d.ep = ep;
  d.dispatch_fp8 = w.dispatch_dtype == DispatchDtype::kFp8;
  const int64_t window = int64_t(window_layout(d, size_t(S)).bytes + kWindowHeaderBytes);
  return saturating_sum(
      {saturating_product(
           {4, saturating_sum({E + ep, T * K, T * ep, 2 * wire_max(d) * K, 2 * ep * T * K})}),
       saturating_product({S, ep, T, H}), ExpertBlocks::device_bytes(ep, E_local), window});
}

}  // namespace moe
