#pragma once
// The CUDA backend's compute behind the Ops interface: kernels from kernels/cuda, expert and
// router GEMMs on cuBLASLt, everything on one stream (NCCL shares it, so no cross-stream sync is
// needed between compute and communication), except what the orchestration puts on the side
// lane (fork_side), a second stream ordered against the first by two events. Storage tensors are
// bf16 (or fp32) on the device.
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/ops.h"

namespace moe {
namespace cuda {
class GemmRunner;
struct GemmProblem;
}  // namespace cuda

class CudaOps : public Ops {
 public:
  // Selects `device` and creates the stream, cuBLASLt runner and pinned staging; `gemm` (the
  // workload's gemm.* keys) sets the runner's streams, its algorithm policy and, unless auto, the
  // expert GEMM method.
  CudaOps(int device, DType dtype, const GemmConfig& gemm);
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  // The stream calls go to now: the main lane's, or the side lane's between fork_side() and
  // to_main(). NcclComm and the phase timer read it at each call.
  const cudaStream_t* current_stream() const { return &stream_; }
  // Replaces cudaStreamSynchronize wherever the host waits, e.g. with NcclComm::wait, whose
  // timeout keeps a dead peer from hanging this rank.
  void set_waiter(std::function<void(const char*)> waiter) { waiter_ = std::move(waiter); }
  cuda::GemmRunner& gemm_runner() { return *gemm_; }

  std::string name() const override { return "cuda"; }
  void* alloc(size_t bytes) override;
  void release(void* p) override;
  size_t bytes_of(DType t) const override;
  DType storage_dtype() const override { return dtype_; }
  void fill_seeded(void* dst, const InitRule& rule, int64_t begin, int64_t n) override;
  std::vector<std::string> expert_gemm_methods() const override;
  void set_expert_gemm_method(const std::string& name) override;
  GemmPlanCounts gemm_plan_counts() const override;
  void download_floats(float* dst, const void* src, int64_t n, DType t) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  uint64_t digest(const void* src, size_t bytes) override;
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void sync() override;
  void fork_side() override;
  void to_main() override;
  void join_side() override;
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
  // Grow-only device scratch owned by the backend (sized in warm-up, reused after).
  void* scratch(int slot, size_t bytes);

  DType dtype_;
  cudaStream_t stream_ = nullptr;  // the current lane: main_ or side_
  cudaStream_t main_ = nullptr, side_ = nullptr;
  cudaEvent_t forked_ = nullptr, side_done_ = nullptr;
  std::unique_ptr<cuda::GemmRunner> gemm_;
  std::function<void(const char*)> waiter_;
  bool fixed_gemm_method_ = false;  // gemm.method named one: no choice in warm-up
  int64_t in_use_ = 0, high_water_ = 0;
  struct Scratch {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  std::vector<Scratch> scratch_;                // one per ScratchSlot (cuda_ops.cu)
  std::unordered_map<void*, size_t> sizes_;     // allocation sizes, for the exact high-water mark
  std::vector<cuda::GemmProblem> problems_[2];  // the expert GEMM lists, reused every step
};

}  // namespace moe
