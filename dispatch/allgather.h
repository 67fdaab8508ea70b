#pragma once
// dispatch: allgather. The EP group all-gathers its tokens and their routing, each rank's experts
// take the rows routed to them, and a reduce-scatter returns each token's weighted sum to its rank
// (Megatron-Core's all-gather token dispatcher). A token crosses to each other EP rank once per
// direction whatever its K, but every rank receives every token: it moves fewer bytes than
// alltoall where K is large against ep (docs/layer.md, "Dispatchers").
//
// Layout: each rank computes its own send positions with dispatch_layout (so the capacity drops
// are the decisions alltoall makes: per source rank and expert), then all-gathers its counts per
// expert, send positions and p. From the counts every rank knows where each source's rows for its
// experts begin in that source's send order (core/layout.h gathered_counts, then
// dispatch/expert_blocks.h); one kernel turns the gathered send positions into positions in the
// expert-major buffer (-1: not this rank's).
// Inside an expert's block the rows come by source rank, then t*K + k: alltoall's expert-major
// order row for row, so the experts see bitwise the same inputs (xe, dye) and produce the same h,
// a, ye, dxe, dw_in, dw_out and dp (tests/mpi/allgather.sh compares the digests).
//
// The four directions (each timed as its a2a_* phase):
// - dispatch_fwd: all-gather x [T, H] -> [ep*T, H]; permute the gathered rows into expert-major
//   order; padding rows zeroed.
// - combine_fwd: each rank sums p * y over its experts' rows of all ep*T tokens in fp32
//   (combine_fwd_f32), a reduce-scatter (fp32) adds the ranks' partial sums, out = storage(sum).
//   alltoall sums a token's K rows in k order; this sums each rank's rows in k order, then the
//   ranks' partial sums: out is not bitwise alltoall's (fp32 rounding, then at most a bf16 ulp
//   here and there), well inside MATH.md's tolerance. Partial sums travel in fp32: twice a bf16
//   row's bytes, so that the sum is rounded once, as alltoall's is.
// - combine_bwd: all-gather dout; dye = p * dout on this rank's rows and dp = <y, dout> for them
//   (0 elsewhere); a reduce-scatter (fp32) of dp [ep*T, K] returns each (t, k) its value: exactly
//   one rank holds a non-zero term, so the sum is exact. Only the all-gather is timed as
//   a2a_combine_bwd (dp's reduce-scatter needs the combine's backward first); its bytes are
//   DispatchBytes::other.
// - dispatch_bwd: each rank sums its experts' dx rows per gathered token in fp32 (unpermute_sum),
//   a reduce-scatter (fp32) gives dx_acc [T, H]. Like out, dx_acc is not bitwise alltoall's.
// ep > 1 only: at ep 1 make_dispatcher builds alltoall's local path (dispatch/registry.cpp).
#include <memory>
#include <vector>

#include "dispatch/dispatcher_base.h"
#include "dispatch/expert_blocks.h"

namespace moe {

class AllgatherDispatcher : public DispatcherBase {
 public:
  AllgatherDispatcher(const Dims& d, const Mesh& mesh, Device& device, Ops& ops, Comm& comm,
                      PhaseTimer& timer, const DispatchPhases& phases);
  AllgatherDispatcher(const AllgatherDispatcher&) = delete;
  AllgatherDispatcher& operator=(const AllgatherDispatcher&) = delete;

  const char* name() const override { return "allgather"; }
  void layout(const int32_t* idx, const float* p) override;
  ExpertOffsets expert_offsets() const override { return blocks_.offsets(); }
  ChunkRows rows_by_source() const override {
    return {counts_all_ + ep_rank_ * d_.E_local, d_.E, blocks_.offsets().device, 0};
  }
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
  Dims dg_;  // the EP group's gathered tokens: T = ep * d_.T

  // This rank's layout: counts per expert [E], send positions [T*K].
  int32_t* counts_ = nullptr;
  int32_t* send_pos_ = nullptr;
  // The group's, gathered: counts [ep, E], send positions and p [ep*T*K].
  int32_t* counts_all_ = nullptr;
  int32_t* send_pos_all_ = nullptr;
  float* p_all_ = nullptr;
  // [ep*T*K]: each gathered row's place in the expert-major buffer, -1 where not this rank's.
  int32_t* pos_ = nullptr;
  ExpertBlocks blocks_;
  // Gathered rows [ep*T, H] storage (x, later dout); fp32 partial sums [ep*T, H] (out, later
  // dx); out's reduced sums [T, H] fp32; dp's partial values [ep*T*K] fp32.
  void* rows_all_ = nullptr;
  float* partial_ = nullptr;
  float* out_f32_ = nullptr;
  float* dp_all_ = nullptr;

  std::vector<int32_t> counts_host_;  // [E] this rank's, for traffic() after the step
  const void* ye_used_ = nullptr;     // the forward's y, which the combine's backward reads
};

}  // namespace moe
