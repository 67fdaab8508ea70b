#pragma once
// One MoE layer training step over a backend {Ops, Comm}: FSDP gather, router, dispatch, expert
// FFN, combine, and the whole backward with the gradient reductions. Reading run_step() top to
// bottom follows the step; each phase is one Ops call or one collective, timed on its own.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "core/mesh.h"
#include "core/ops.h"
#include "core/workload.h"

namespace moe {

// Timed phases. The first kNumStepPhases partition the step; the a2a and counts phases are parts
// of layout/dispatch/combine, timed separately for bandwidth.
enum Phase : int {
  kFsdpGather,
  kRouterFwd,
  kLayout,
  kDispatchFwd,
  kExpertsFwd,
  kCombineFwd,
  kCombineBwd,
  kExpertsBwd,
  kDispatchBwd,
  kRouterBwd,
  kGradSync,
  kNumStepPhases,
  kCountsExchange = kNumStepPhases,
  kA2aDispatchFwd,
  kA2aCombineFwd,
  kA2aCombineBwd,
  kA2aDispatchBwd,
  kStep,
  kNumPhases
};
const char* phase_name(int phase);

// What one step moved and routed, for bandwidth and routing statistics (this rank's view).
struct StepTraffic {
  int64_t a2a_rows_sent = 0;       // rows in this rank's send buffer (T*K less capacity drops)
  int64_t a2a_rows_to_others = 0;  // of which to other EP ranks
  // Rows this rank's experts return (combine direction: rows_received) to other EP ranks.
  int64_t a2a_rows_returned_to_others = 0;
  int64_t rows_received = 0;                // rows this rank's experts processed
  int64_t rows_dropped = 0;                 // this rank's (t, k) over the capacity, not sent
  int64_t rows_padded = 0;                  // zero rows added for align on this rank's experts
  std::vector<float> global_expert_counts;  // [E] c_e over the world's tokens
};

// Host copies of everything a check or dump needs, taken after a step (untimed).
struct StepOutputs {
  std::vector<float> x, dout, out, dx;  // [T, H]
  std::vector<int32_t> idx;             // [T, K]
  std::vector<uint8_t> dropped;         // [T, K] 1 where the capacity dropped the row
  std::vector<float> p;                 // [T, K]
  std::vector<float> w_gate, dw_gate;   // [H, E]; dw_gate after the world all-reduce
  std::vector<float> expert_bias;       // [E] (empty unless router.expert_bias)
  std::vector<float> w_in, w_out;       // this rank's experts' full weights, as used (when wanted)
  // Gradients over the world's tokens of local experts [grad_expert_begin, grad_expert_begin + n).
  std::vector<float> dw_in, dw_out;
  int64_t grad_expert_begin = 0;
  double aux = 0, z = 0;  // global
  double loss = 0;        // global sum <out, dout> + aux + z: set by the caller (a host reduction)
};

// What download_outputs copies of the experts, whose weights and gradients are most of the bytes
// (DeepSeek-V3 at EP 1: 45 GB of each as floats): the weights only for a dump (the check makes its
// own), and the gradients of local experts [grad_begin, grad_end) (grad_end -1: to the last).
struct OutputsWanted {
  bool expert_weights = true;
  int64_t grad_begin = 0, grad_end = -1;
};

// Grow-only backend buffer: reallocated only when a ragged size grows past what it holds.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
};

class MoeLayer {
 public:
  MoeLayer(const Workload& w, const Mesh& mesh, Ops& ops, Comm& comm);
  ~MoeLayer();
  MoeLayer(const MoeLayer&) = delete;
  MoeLayer& operator=(const MoeLayer&) = delete;

  const Dims& dims() const { return d_; }
  // Draws this step's x and dout from the seed and uploads them (untimed).
  void load_step_inputs(int64_t step);
  // Forward + backward of one step; phase times (ms, this rank) in `phase_ms` [kNumPhases].
  void run_step(std::vector<double>& phase_ms);
  const StepTraffic& traffic() const { return traffic_; }
  // Downloads the last step's tensors; gathers FSDP gradient shards back (collective, untimed).
  StepOutputs download_outputs(const OutputsWanted& want = {});
  // Digests (core/digest.h) of the last step's results, computed where they live, without a
  // download: out, dx, dw_gate, idx, and this rank's FSDP shards of dw_in and dw_out (every
  // gradient element is then counted on exactly one rank of its EP group).
  std::vector<std::pair<std::string, uint64_t>> digest_outputs();

 private:
  void fsdp_gather();
  void route();
  void exchange_counts();
  void dispatch(const void* src_send, void* dst_expert_major, int phase_a2a);
  void combine_back(const void* src_expert_major, void* dst_send, int phase_a2a);
  void dispatch_bwd();
  void grad_sync();
  void exchange_counts_grow_buffers_for(int64_t rows);
  void* grow(DeviceBuffer& b, size_t bytes);
  // The buffer in send order: send_buffer, or expert_major where the two orders coincide.
  void* send_order(void* send_buffer, const DeviceBuffer& expert_major) const;
  void* fixed(size_t bytes);

  Workload w_;
  Mesh mesh_;
  Ops& ops_;
  Comm& comm_;
  // send_order_is_expert_major (ep 1, align 1): the regroups would be plain copies, so there are
  // none, and the send-order views are the expert-major buffers.
  bool send_is_expert_major_ = false;
  Dims d_;
  std::unique_ptr<PhaseTimer> timer_;
  std::vector<void*> owned_;

  // Parameters and their gradients.
  void* w_gate_ = nullptr;        // [H, E] storage
  float* expert_bias_ = nullptr;  // [E] fp32 (nullptr unless enabled)
  void* w_in_shard_ = nullptr;    // [shard_in_] storage: this rank's FSDP shard
  void* w_out_shard_ = nullptr;   // [shard_out_]
  void* w_in_full_ = nullptr;     // [E_local, H, 2F] (+ padding) gathered
  void* w_out_full_ = nullptr;    // [E_local, F, H] (+ padding)
  float* dw_gate_ = nullptr;      // [H, E] fp32
  void* dw_in_full_ = nullptr;    // [fsdp * shard_in_] grad dtype (Dims::grad_dtype)
  void* dw_out_full_ = nullptr;
  void* dw_in_shard_ = nullptr;  // [shard_in_] after the reduce-scatter
  void* dw_out_shard_ = nullptr;
  int64_t shard_in_ = 0, shard_out_ = 0;  // elements per FSDP shard (padded)

  // Per-token tensors.
  void *x_ = nullptr, *dout_ = nullptr, *out_ = nullptr, *dx_ = nullptr;  // [T, H] storage
  float* dx_acc_ = nullptr;                                               // [T, H] fp32
  float *logits_ = nullptr, *scores_ = nullptr, *dlogits_ = nullptr;      // [T, E] fp32
  int32_t* idx_ = nullptr;                                                // [T, K]
  int32_t* forced_idx_ = nullptr;       // [T, K] this step's forced routing (nullptr: learned)
  float *p_ = nullptr, *dp_ = nullptr;  // [T, K] fp32
  float* stats_ = nullptr;              // [2E + 1] fp32
  int32_t* send_pos_ = nullptr;         // [T * K]
  // [E] then [ep, E_local], adjacent so that one copy brings both to the host.
  int32_t* expert_counts_ = nullptr;
  int32_t* recv_counts_ = nullptr;

  // Send-order rows [T*K, H] storage: dispatched x (reused for returning dx), y, dy.
  void *send_ = nullptr, *y_send_ = nullptr, *dy_send_ = nullptr;
  // Receive side, ragged (R rows): landing buffer, expert-major inputs and activations.
  DeviceBuffer recv_, xe_, h_, a_, ye_, dye_, da_, dh_, dxe_;

  // Host copy of the layout (the one device-to-host copy per dispatch): counts_host_ holds
  // expert_counts_host_ [E] then recv_counts_host_ [ep, E_local].
  std::vector<int32_t> counts_host_;
  int32_t *expert_counts_host_ = nullptr, *recv_counts_host_ = nullptr;
  std::vector<int64_t> send_rows_, recv_rows_, row_offsets_;  // per EP rank; [E_local + 1]
  int64_t rows_received_ = 0;  // before the align padding (row_offsets_ includes it)
  std::vector<float> stats_host_;
  StepTraffic traffic_;
};

}  // namespace moe
