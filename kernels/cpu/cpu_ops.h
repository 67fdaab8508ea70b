#pragma once
// The CPU backend's compute: host loops from kernels/cpu behind the Ops interface. Storage tensors
// are floats already rounded to the workload dtype.
#include "core/ops.h"

namespace moe {

class CpuOps : public Ops {
 public:
  // dtype: the workload's storage dtype, which the calibration GEMM rounds its output to (the
  // step's calls carry it in Dims).
  explicit CpuOps(DType dtype) : dtype_(dtype) {}
  std::string name() const override { return "cpu"; }
  void* alloc(size_t bytes) override;
  void release(void* p) override;
  size_t bytes_of(DType) const override { return sizeof(float); }
  DType storage_dtype() const override { return dtype_; }
  void fill_seeded(void* dst, const InitRule& rule, int64_t begin, int64_t n) override;
  void download_floats(float* dst, const void* src, int64_t n, DType t) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  uint64_t digest(const void* src, size_t bytes) override;
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void sync() override {}
  int64_t memory_high_water() const override { return high_water_; }
  void reset_memory_high_water() override { high_water_ = in_use_; }
  std::unique_ptr<PhaseTimer> make_timer(int num_phases) override;
  double time_dense_gemm_ms(int64_t M, int64_t N, int64_t K, int iters) override;
  double time_memory_copy_ms(int64_t bytes, int iters) override;

  void router_fwd(const Dims& d, const RouterConfig& cfg, const void* x, const void* w_gate,
                  const float* expert_bias, const int32_t* forced_idx, float* logits, float* scores,
                  int32_t* idx, float* p, float* stats) override;
  void router_bwd(const Dims& d, const RouterConfig& cfg, const void* x, const void* w_gate,
                  const float* logits, const float* scores, const int32_t* idx, const float* dp,
                  const float* global_stats, float* dlogits, float* dx_acc, void* dx,
                  float* dw_gate) override;
  void dispatch_layout(const Dims& d, const int32_t* idx, const float* p, int32_t* expert_counts,
                       int32_t* send_pos) override;
  void permute(const Dims& d, const void* x, const int32_t* send_pos, void* send) override;
  void regroup(const Dims& d, const void* src, const int32_t* counts, const int32_t* counts_host,
               bool to_expert_major, void* dst) override;
  void expert_ffn_fwd(const Dims& d, const void* xe, const void* w_in, const void* w_out,
                      const int64_t* row_offsets_host, void* h, void* a, void* ye) override;
  void expert_ffn_bwd_data(const Dims& d, const void* dye, const void* h, const void* w_in,
                           const void* w_out, const int64_t* row_offsets_host, void* da, void* dh,
                           void* dxe) override;
  void expert_ffn_bwd_weights(const Dims& d, const void* dye, const void* xe, const void* a,
                              const void* dh, const int64_t* row_offsets_host, void* dw_in,
                              void* dw_out) override;
  void combine_fwd(const Dims& d, const void* y_send, const int32_t* send_pos, const float* p,
                   void* out) override;
  void combine_bwd(const Dims& d, const void* dout, const void* y_send, const int32_t* send_pos,
                   const float* p, void* dy_send, float* dp) override;
  void unpermute_sum(const Dims& d, const void* dx_send, const int32_t* send_pos,
                     float* dx_acc) override;

 private:
  DType dtype_;
  int64_t in_use_ = 0, high_water_ = 0;
};

}  // namespace moe
