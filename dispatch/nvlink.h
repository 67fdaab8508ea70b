#pragma once
// dispatch: nvlink. Our own intranode dispatcher: no NCCL call and no host sync in the step. Every
// EP rank of a host holds a window the others write into directly (comm/peer_window.h: CUDA IPC
// mappings over NVLink; MPI shared memory on the CPU backend), and each direction is one kernel
// that writes rows straight into the ranks that need them, then a barrier on the stream.
// Deduplicated by construction: a token's row crosses to each rank its kept experts are on once,
// as alltoall_dedup's wire rows do (DeepEP's intranode kernels are the model).
//
// Layout: the capacity drops and send positions are alltoall's (dispatch_layout), the wire rows
// alltoall_dedup's (dedup_layout: wire_pos [T, ep], each (t, r)'s row in this rank's wire order).
// Every rank writes its counts per expert and wire rows per rank, send positions, p and wire_pos
// into every rank's window (fixed sizes: no counts on the host), then from the gathered counts
// each rank plans its experts' blocks and positions as allgather does (expert_major_positions),
// so that inside an expert the rows come by source rank, then t*K + k: alltoall's order.
//
// The four directions (each timed with its barrier as its a2a_* phase):
// - dispatch_fwd: rows_to_ranks writes x's row t into each rank r that takes some of t's rows,
//   at row (source, t) of r's landing rows [ep * T]; a barrier; each rank permutes its landed
//   rows into expert-major order. xe is alltoall's, bitwise.
// - combine_fwd: each rank sums p * y over its rows of each landed token in fp32 and stores the
//   sum in the storage dtype (combine_fwd over the group's tokens), and rows_to_sources writes
//   each sum into its source's window at the source's wire row of (t, this rank); a barrier; the
//   source sums its rows in rank order in fp32 and rounds once. That is alltoall_dedup's
//   arithmetic step for step: out is bitwise alltoall_dedup's.
// - combine_bwd: dout as x went; dye = p * dout and dp = <dout, y> where y lives (combine_bwd
//   over the group's tokens); dp's rows [K] fp32 go back as the sums did (outside the timed
//   phase, after a second barrier) and the source sums them (one rank holds each (t, k)).
// - dispatch_bwd: each rank sums its dx rows per landed token in fp32, stores them, and they go
//   back as out's sums did; the source sums them into dx_acc in fp32.
// So every result is bitwise alltoall_dedup's (tests/mpi/nvlink.sh compares the digests).
//
// Why the barriers suffice: a rank writes a window region for one direction only after passing
// the previous direction's barrier, which every rank reaches only after consuming that region's
// last contents; consecutive directions use different regions (metadata, landing rows, returned
// rows, landing rows, dp, returned rows), and the metadata is read only before the step's last
// barrier. ep > 1 only: at ep 1 make_dispatcher builds alltoall's local path.
#include <memory>
#include <vector>

#include "dispatch/dispatcher_base.h"
#include "dispatch/expert_blocks.h"

namespace moe {

class NvlinkDispatcher : public DispatcherBase {
 public:
  NvlinkDispatcher(const Dims& d, const Mesh& mesh, Device& device, Ops& ops, Comm& comm,
                   PhaseTimer& timer, const DispatchPhases& phases);
  NvlinkDispatcher(const NvlinkDispatcher&) = delete;
  NvlinkDispatcher& operator=(const NvlinkDispatcher&) = delete;

  const char* name() const override { return "nvlink"; }
  void layout(const int32_t* idx, const float* p) override;
  ExpertOffsets expert_offsets() const override { return blocks_->offsets(); }
  ChunkRows rows_by_source() const override;
  const int32_t* send_pos() const override { return send_pos_; }
  void dispatch_fwd(const void* x, void* xe) override;
  void combine_fwd(const void* ye, const float* p, void* out) override;
  void combine_bwd(const void* dout, const float* p, void* dye, float* dp) override;
  void dispatch_bwd(const void* dxe, float* dx_acc) override;
  StepTraffic traffic() override;

  static DispatchBytes bytes_for_rows(const Workload& w, const Mesh& mesh, size_t storage_bytes,
                                      double rows_per_rank);
  static int64_t buffer_bytes(const Workload& w, int64_t storage_bytes);

  // Where each region sits in every rank's window (bytes from its start), and its size.
  struct Window {
    size_t counts = 0, send_pos = 0, p = 0, wire_pos = 0;  // metadata [ep][...] per source
    size_t rows = 0;                                       // landing rows [ep * T, row_bytes]
    size_t returned = 0;                                   // [T * min(K, ep), H] storage
    size_t dp = 0;                                         // [T * min(K, ep), K] fp32
    size_t bytes = 0;
  };
  static Window window_layout(const Dims& d, size_t storage_bytes);

 private:
  Dims to_wire(const Dims& rows) const;
  // Every rank's window at `offset`, as this rank's row moves address them.
  RankBases at(size_t offset) const;
  template <class T>
  T* mine(size_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(window_->peer(ep_rank_)) + offset);
  }

  Dims dg_;  // the EP group's tokens: T = ep * d_.T
  std::unique_ptr<PeerWindow> window_;
  Window at_;

  // This rank's layout: counts per expert [E], then wire rows per rank [ep] (one put); send
  // positions [T*K]; each (t, r)'s wire row [T, ep]; dedup_layout's slots and weights (unused).
  int32_t* counts_ = nullptr;
  int32_t* send_pos_ = nullptr;
  int32_t* wire_pos_ = nullptr;
  int32_t* slots_ = nullptr;
  float* weights_ = nullptr;
  // The group's tokens on this rank: each routed row's expert-major position [ep*T*K] (-1: not
  // here); partial sums [ep*T, H] storage (out's, then dx's); dp [ep*T*K] fp32.
  int32_t* pos_ = nullptr;
  void* partial_ = nullptr;
  float* dp_all_ = nullptr;
  std::unique_ptr<ExpertBlocks> blocks_;

  std::vector<int32_t> counts_host_;  // every source's counts, for traffic() after the step
  const void* ye_used_ = nullptr;
};

}  // namespace moe
