#pragma once
// dispatch: alltoall_dedup. A token crosses to each EP rank its kept rows go to once, whatever
// how many of that rank's experts it picked (DeepEP's deduplicated dispatch): one wire row per
// (token, destination rank), with K int32 slots and K fp32 weights as metadata, ordered by rank,
// then token. It moves fewer bytes than alltoall where a token's K experts share ranks
// (docs/layer.md, "Dispatchers").
//
// Layout: the capacity drops and send positions are alltoall's (dispatch_layout, per source rank
// and expert); dedup_layout groups the kept (t, k) rows by destination rank into wire rows. A
// wire row's slot k is its (t, k) row's place among what alltoall would send that rank (-1: not
// that rank's, or dropped). Counts per expert and wire rows per rank are exchanged (all-to-alls
// of int32) and copied to the host, and each rank's expert-major layout (core/layout.h
// block_layout, padded to align) is alltoall's.
//
// The four directions (each all-to-all timed as its a2a_* phase):
// - dispatch_fwd: x into wire order (permute), all-to-alls of the wire rows, their slots and
//   their weights; the receiving rank turns each source's slots into expert-major positions
//   (expert_major_positions) and expands each wire row to its local experts' rows (permute).
//   Inside each local expert the rows come by source rank, then t*K + k: alltoall's expert-major
//   order row for row, so xe, and with it h, a, ye, and the weight gradients are bitwise
//   alltoall's.
// - combine_fwd: the expert rank sums each wire row's local expert outputs weighted by p in fp32
//   (combine_fwd over the slots) and stores the sum in the storage dtype; one row per (token,
//   rank) goes back; the source sums its rows in fp32 and rounds once (unpermute_sum_storage).
//   Partial sums cross in the storage dtype, as DeepEP's bf16 combine does, which keeps the
//   bytes at the wire rows'; with bf16 that rounds each partial sum once more than alltoall does
//   (docs/layer.md gives the cost), while fp32 storage loses nothing.
// - combine_bwd: dout into wire order and across once per (token, rank); where y lives, dye =
//   p * dout for each local expert row and dp = <dout, y> (combine_bwd over the slots: bitwise
//   alltoall's, both); dp [W, K] fp32 returns to the source (an all-to-all outside the a2a
//   phase, which needs the combine's backward first: DispatchBytes::other) and is summed there
//   into dp [T, K], one rank holding each (t, k)'s value and the others zeros, so exactly.
// - dispatch_bwd: the expert rank sums each wire row's local experts' dx rows in fp32, stores the
//   sum in the storage dtype and returns one row per (token, rank); the source sums them in fp32
//   into dx_acc (unpermute_sum).
// ep > 1 only: at ep 1 make_dispatcher builds alltoall's local path (dispatch/registry.cpp).
#include <memory>
#include <vector>

#include "dispatch/dispatcher_base.h"
#include "dispatch/expert_blocks.h"

namespace moe {

class AlltoallDedupDispatcher : public DispatcherBase {
 public:
  // planned_rows: the wire rows this rank is first sized to receive (planned_received_rows).
  AlltoallDedupDispatcher(const Dims& d, const Mesh& mesh, Device& device, Ops& ops, Comm& comm,
                          PhaseTimer& timer, const DispatchPhases& phases, int64_t planned_rows);
  ~AlltoallDedupDispatcher() override;
  AlltoallDedupDispatcher(const AlltoallDedupDispatcher&) = delete;
  AlltoallDedupDispatcher& operator=(const AlltoallDedupDispatcher&) = delete;

  const char* name() const override { return "alltoall_dedup"; }
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
  // Wire rows a rank receives per step as ranks_per_token.h plans them (a resolved workload,
  // ep > 1).
  static int64_t planned_received_rows(const Workload& w);

 private:
  // The receiving side's buffers, sized for `rows` wire rows (ragged: grown in layout()).
  void hold_received(int64_t rows);
  void release_received();
  // The ops' shapes: the wire rows that reached this rank (T of them, K slots each), and this
  // rank's tokens with one wire row per destination rank (K = ep).
  // rows: d_, or dispatched_ for the dispatched rows.
  Dims received(const Dims& rows) const;
  Dims to_wire(const Dims& rows) const;
  // Rows of row_bytes through the EP group's all-to-all: toward the experts (the dispatch
  // direction) or back to the tokens' ranks.
  void to_experts(const void* send, void* recv, size_t row_bytes);
  void to_tokens(const void* send, void* recv, size_t row_bytes);

  // This rank's layout: send positions [T*K]; counts [E], then what arrives [ep, E_local], wire
  // rows to each rank [ep], wire rows from each [ep] (adjacent, one copy to the host).
  int32_t* send_pos_ = nullptr;
  int32_t* counts_ = nullptr;
  int32_t *recv_counts_ = nullptr, *wire_counts_ = nullptr, *wire_recv_ = nullptr;
  // The send side, sized for T * min(K, ep) wire rows: each (t, r)'s wire row [T, ep]; the rows
  // [., H] storage (x, then out's partial sums back, dout, dx's partial sums back); their slots
  // and weights [., K]; dp back [., K] fp32.
  int32_t* wire_pos_ = nullptr;
  void* wire_ = nullptr;
  int32_t* slots_ = nullptr;
  float* weights_ = nullptr;
  float* dp_wire_ = nullptr;
  // The receiving side, `received_rows_` wire rows: the rows (x, then out's partial sums, dout,
  // dx's partial sums), their slots and weights, each slot's expert-major position and dp.
  int64_t received_rows_ = 0;
  void* recv_ = nullptr;
  int32_t *recv_slots_ = nullptr, *pos_ = nullptr;
  float *recv_weights_ = nullptr, *recv_dp_ = nullptr;
  std::unique_ptr<ExpertBlocks> blocks_;

  std::vector<int32_t> counts_host_;  // as counts_ and what follows it
  int32_t *recv_counts_host_ = nullptr, *wire_counts_host_ = nullptr, *wire_recv_host_ = nullptr;
  // Wire rows to and from each EP rank, and where each source's begin among those received.
  std::vector<int64_t> send_rows_, recv_rows_, recv_first_;
  int64_t rows_kept_ = 0;  // this rank's (t, k) rows after the capacity
  const void* ye_used_ = nullptr;
};

}  // namespace moe
