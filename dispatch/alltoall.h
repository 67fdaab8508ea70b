#pragma once
// dispatch: alltoall. Every routed (token, expert) row crosses the wire on its own: the permute
// writes rows in send order (by destination rank, then expert), one ragged all-to-all per
// direction moves them, and a regroup turns the source-rank-major landing buffer into each local
// expert's contiguous block (padded to align). Megatron-Core's all-to-all token dispatcher.
// At ep 1 nothing crosses: the permute writes the experts' input order directly (send order with
// align 1; the padded expert-major positions with align > 1), with no regroup. This local path is
// every `dispatch` kind's at ep 1 (make_dispatcher, dispatch/registry.cpp).
//
// Sync-free (Dims::sync_free, graph: true) at ep 1 only: NCCL's ragged all-to-all takes its sizes
// from the host. The counts then stay on the device through the step, and come to the host for
// traffic() after it.
#include <memory>
#include <vector>

#include "dispatch/dispatcher_base.h"
#include "dispatch/expert_blocks.h"

namespace moe {

class AlltoallDispatcher : public DispatcherBase {
 public:
  AlltoallDispatcher(const Dims& d, const Mesh& mesh, Device& device, Ops& ops, Comm& comm,
                     PhaseTimer& timer, const DispatchPhases& phases);
  AlltoallDispatcher(const AlltoallDispatcher&) = delete;
  AlltoallDispatcher& operator=(const AlltoallDispatcher&) = delete;

  const char* name() const override { return "alltoall"; }
  void layout(const int32_t* idx, const float* p) override;
  ExpertOffsets expert_offsets() const override;
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

 private:
  // rows: d_, or dispatched_ for the dispatched rows.
  void to_expert_major(const Dims& rows, const void* send_order, void* expert_major, int phase_a2a);
  void to_send_order(const void* expert_major, void* send_order, int phase_a2a);
  // The host's part of the layout, from the counts copied there: the all-to-all's split sizes,
  // the host offsets, the landing buffer grown to them.
  void plan_on_host();
  // Rows in source-rank-major order at most (the regroups' grids).
  int64_t received_bound() const;

  // Where the send order is the expert-major order (ep 1, align 1: send_order_is_expert_major),
  // the regroups would be plain copies: there are none, and the send-order views are the
  // caller's expert-major buffers.
  bool send_is_expert_major_ = false;
  // At ep 1 with align > 1 the rows are placed straight into the padded expert-major order (the
  // blocks' positions, pos_, and their padding zeroed).
  std::unique_ptr<ExpertBlocks> local_blocks_;
  int32_t* pos_ = nullptr;  // [T * K] expert-major positions (with local_blocks_)
  // Where permute puts each routed row and the combines find it: send_pos_, or pos_.
  const int32_t* row_pos_ = nullptr;
  // No send-order buffers: the rows go straight between the tokens and the expert-major buffers.
  bool direct() const { return send_is_expert_major_ || local_blocks_ != nullptr; }

  int32_t* send_pos_ = nullptr;  // [T * K]
  // [E] then [ep, E_local], adjacent so that one copy brings both to the host.
  int32_t* expert_counts_ = nullptr;
  int32_t* recv_counts_ = nullptr;
  int64_t* offsets_dev_ = nullptr;  // [E_local + 1], from recv_counts_ on the device
  int64_t rows_bound_ = 0;          // expert-major rows any routing gives (sync-free)
  bool host_stale_ = false;         // sync-free: the host copy is from an earlier step
  // Send-order rows [T*K, H] storage: dispatched x (reused for returning dx), y, dy.
  void *send_ = nullptr, *y_send_ = nullptr;
  void* dy_send_ = nullptr;
  // The all-to-all's landing buffer, ragged (grown when more rows arrive than it holds).
  GrownBuffer recv_{device_};  // the all-to-all's landing rows (ep > 1), grown in layout()

  // Host copy of the layout (the one device-to-host copy per dispatch): counts_host_ holds
  // expert_counts_host_ [E] then recv_counts_host_ [ep, E_local].
  std::vector<int32_t> counts_host_;
  int32_t *expert_counts_host_ = nullptr, *recv_counts_host_ = nullptr;
  std::vector<int64_t> send_rows_, recv_rows_, row_offsets_;  // per EP rank; [E_local + 1]
  int64_t rows_received_ = 0;  // before the align padding (row_offsets_ includes it)
  // The send-order y of the forward, which the combine's backward reads.
  const void* y_send_used_ = nullptr;
};

}  // namespace moe
