#pragma once
// The CPU backend's compute: host loops from kernels/cpu behind the Ops interface, on CpuDevice
// memory. Storage tensors are floats already rounded to the workload dtype.
#include "core/device.h"
#include "core/fp8_scales.h"
#include "core/ops.h"

namespace moe {

class CpuOps : public Ops {
 public:
  // device: where the calibration GEMM's clock and storage dtype come from (the step's calls
  // carry the dtype in Dims).
  explicit CpuOps(Device& device) : device_(device) {}
  std::string name() const override { return "cpu"; }
  double time_dense_gemm_ms(int64_t M, int64_t N, int64_t K, int iters) override;
  double time_dense_fp8_gemm_ms(int64_t M, int64_t N, int64_t K, Fp8Recipe recipe,
                                int iters) override;

  void router_fwd(const Dims& d, const RouterConfig& cfg, const void* x, const void* w_gate,
                  const float* expert_bias, const int32_t* forced_idx, float* logits, float* scores,
                  int32_t* idx, float* p, float* stats) override;
  void router_bwd(const Dims& d, const RouterConfig& cfg, const void* x, const void* w_gate,
                  const float* logits, const float* scores, const int32_t* idx, const float* dp,
                  const float* global_stats, float* dlogits, float* dx_acc, void* dx,
                  float* dw_gate) override;
  void experts_to_slots(const Dims& d, const int32_t* idx, const int32_t* slot_of,
                        int32_t* slots) override;
  void dispatch_layout(const Dims& d, const int32_t* idx, const float* p, int32_t* expert_counts,
                       int32_t* send_pos) override;
  void expert_major_positions(const Dims& d, const int32_t* send_pos, const int32_t* starts,
                              const int32_t* dest, int32_t* pos) override;
  void dedup_layout(const Dims& d, const int32_t* idx, const float* p, const int32_t* expert_counts,
                    const int32_t* send_pos, int32_t* wire_pos, int32_t* wire_counts,
                    int32_t* slots, float* weights) override;
  void expert_offsets(const Dims& d, const int32_t* counts, int64_t stride,
                      int64_t* offsets) override;
  void expert_blocks(const Dims& d, const int32_t* counts, int64_t stride, int64_t first,
                     int32_t* table, int64_t* offsets) override;
  void zero_expert_padding(const Dims& d, const int32_t* rows, const int64_t* offsets,
                           void* expert_major) override;
  void merge_chunk_layout(const Dims& d, const std::vector<ChunkRows>& chunks, int64_t* offsets,
                          int64_t* blocks) override;
  void rows_to_ranks(const Dims& d, const void* src, size_t row_bytes, const int32_t* wire_pos,
                     int64_t first_row, const RankBases& to) override;
  void rows_to_sources(const Dims& d, const void* src, size_t row_bytes,
                       const int32_t* wire_pos_all, int64_t me, const RankBases& to) override;
  void gather_chunk_rows(const Dims& d, int64_t chunks, const int64_t* offsets,
                         const int64_t* blocks, int64_t rows_bound, const void* src,
                         size_t row_bytes, void* dst) override;
  void permute(const Dims& d, const void* x, const int32_t* send_pos, void* send) override;
  void pack_fp8_rows(const Dims& d, const void* x, int64_t n, void* packed) override;
  void regroup(const Dims& d, const void* src, const int32_t* counts, int64_t rows_bound,
               bool to_expert_major, void* dst) override;
  void report_fp8_scales(float* scales) override { fp8_scales_ = scales; }
  void expert_ffn_fwd(const Dims& d, const void* xe, const void* w_in, const void* w_out,
                      const ExpertOffsets& offsets, void* h, void* a, void* ye) override;
  void expert_ffn_bwd_data(const Dims& d, const void* dye, const void* h, const void* w_in,
                           const void* w_out, const ExpertOffsets& offsets, void* da, void* dh,
                           void* dxe) override;
  void expert_ffn_bwd_weights(const Dims& d, const void* dye, const void* xe, const void* a,
                              const void* dh, const ExpertOffsets& offsets, void* dw_in,
                              void* dw_out) override;
  void combine_fwd(const Dims& d, const void* y_send, const int32_t* send_pos, const float* p,
                   void* out) override;
  void combine_fwd_f32(const Dims& d, const void* y_send, const int32_t* send_pos, const float* p,
                       float* out) override;
  void to_storage(const Dims& d, const float* src, int64_t n, void* dst) override;
  void combine_bwd(const Dims& d, const void* dout, const void* y_send, const int32_t* send_pos,
                   const float* p, void* dy_send, float* dp) override;
  void unpermute_sum(const Dims& d, const void* dx_send, const int32_t* send_pos,
                     float* dx_acc) override;
  void unpermute_sum_storage(const Dims& d, const void* src, const int32_t* send_pos,
                             void* dst) override;
  void shared_sum_out(const Dims& d, int64_t S, const void* y_sh, void* out) override;
  void shared_sum_dx(const Dims& d, int64_t S, const void* dx_sh, float* dx_acc) override;

 private:
  void report_scales(const Dims& d, Fp8Computed kind, const void* X, int64_t cols,
                     const ExpertOffsets& offsets);
  Device& device_;
  float* fp8_scales_ = nullptr;  // report_fp8_scales'
};

}  // namespace moe
