#pragma once
// The CUDA backend's compute behind the Ops interface: kernels from kernels/cuda, expert and
// router GEMMs on cuBLASLt, on the CudaDevice's current stream (NCCL uses the same one, so no
// cross-stream sync is needed between compute and communication). Storage tensors are bf16 (or
// fp32) on the device.
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/ops.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/expert_ffn.h"
#include "kernels/cuda/expert_ffn_fp8.h"

namespace moe {
namespace cuda {
class GemmRunner;
struct GemmProblem;
}  // namespace cuda

class CudaOps : public Ops {
 public:
  // Creates the cuBLASLt runner; `gemm` (the workload's gemm.* keys) sets its side streams, its
  // algorithm policy and, unless auto, the expert GEMM method. sync_free (graph: true): auto
  // means the grouped sm90 kernel, the one method that reads the offsets on the device. An FP8
  // precision runs the expert GEMMs on cuBLASLt's FP8 matmul (kernels/cuda/expert_ffn_fp8.h), one
  // fixed way. Work goes to device.stream().
  CudaOps(CudaDevice& device, const GemmConfig& gemm, bool sync_free = false,
          Precision precision = Precision::kBf16);
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  std::string name() const override { return "cuda"; }
  std::vector<std::string> expert_gemm_methods() const override;
  void set_expert_gemm_methods(const ExpertGemmMethods& methods) override;
  void time_expert_gemms(bool on) override;
  ExpertGemmMs expert_gemm_ms() override;
  GemmPlanCounts gemm_plan_counts() const override;
  double time_dense_gemm_ms(int64_t M, int64_t N, int64_t K, int iters) override;
  double time_dense_fp8_gemm_ms(int64_t M, int64_t N, int64_t K, Fp8Recipe recipe,
                                int iters) override;
  // Each expert GEMM's method now, for provenance.
  ExpertGemmMethods current_expert_gemm_methods() const;

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
  void merge_chunk_layout(const Dims& d, const std::vector<ChunkRows>& chunks, int64_t* offsets,
                          int64_t* blocks) override;
  void rows_to_ranks(const Dims& d, const void* src, size_t row_bytes, const int32_t* wire_pos,
                     int64_t first_row, const RankBases& to) override;
  void rows_to_sources(const Dims& d, const void* src, size_t row_bytes,
                       const int32_t* wire_pos_all, int64_t me, const RankBases& to) override;
  void gather_chunk_rows(const Dims& d, int64_t chunks, const int64_t* offsets,
                         const int64_t* blocks, int64_t rows_bound, const void* src,
                         size_t row_bytes, void* dst) override;
  void zero_expert_padding(const Dims& d, const int32_t* rows, const int64_t* offsets,
                           void* expert_major) override;
  void permute(const Dims& d, const void* x, const int32_t* send_pos, void* send) override;
  void pack_fp8_rows(const Dims& d, const void* x, int64_t n, void* packed) override;
  void regroup(const Dims& d, const void* src, const int32_t* counts, int64_t rows_bound,
               bool to_expert_major, void* dst) override;
  void prepare_expert_weights(const Dims& d, int64_t G, const void* w_in,
                              const void* w_out) override;
  bool prepares_expert_weights(const Dims& d) const override {
    return d.precision != Precision::kBf16;
  }
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
  // Grow-only device scratch owned by the ops (sized in warm-up, reused after).
  void* scratch(int slot, size_t bytes);
  // The FP8 GEMMs' operand scratch, sized for these rows.
  cuda::Fp8Scratch fp8_scratch(const Dims& d, const ExpertOffsets& rows);
  // The FP8 codes prepare_expert_weights made of the experts from w_in, w_out on.
  cuda::Fp8Weights fp8_weights(const Dims& d, const void* w_in, const void* w_out) const;
  cudaStream_t stream() const { return device_.stream(); }

  CudaDevice& device_;
  std::unique_ptr<cuda::GemmRunner> gemm_;
  bool fixed_gemm_method_ = false;  // gemm.method named one: no choice in warm-up
  Precision precision_ = Precision::kBf16;
  struct Scratch {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  std::vector<Scratch> scratch_;  // one per ScratchSlot (cuda_ops.cu)
  // One per set of expert weights prepared (the routed experts', the shared experts').
  struct PreparedWeights {
    const void *w_in = nullptr, *w_out = nullptr;
    int64_t G = 0, H = 0, F = 0;
    Scratch memory;
    cuda::Fp8Weights fp8;
  };
  std::vector<PreparedWeights> prepared_;
  // Transposed FP8 codes kept from each forward for the weight gradients on the same operand, one
  // map for xe's and one for a's (keyed by the operand: the routed experts' and each shared
  // expert's a; the routed experts' xe and the shared experts' one x); fresh from the forward
  // until the weight gradient takes them (one on an operand without fresh codes quantizes it
  // itself).
  struct KeptCodes {
    Scratch memory;
    cuda::Fp8Transposed codes;
    bool fresh = false;
  };
  using KeptMap = std::unordered_map<const void*, KeptCodes>;
  KeptMap kept_xe_t_, kept_a_t_;
  // The rows whose dye and dh the last FP8 data gradients left quantized (transposed) in the
  // scratch for the weight gradients, which quantize other rows themselves.
  struct Fp8DyDh {
    const void *dye = nullptr, *dh = nullptr;
    const int64_t* offsets = nullptr;
    bool operator==(const Fp8DyDh& o) const {
      return dye == o.dye && dh == o.dh && offsets == o.offsets;
    }
  };
  Fp8DyDh fp8_dy_dh_left_;
  float* fp8_scales_ = nullptr;  // report_fp8_scales' (device)
  // Where an FP8 forward on xe and a writes the transposed codes it keeps (none where the weight
  // gradients will not take them), and the weight gradients' take of them.
  cuda::Fp8Kept keep_codes(const Dims& d, const ExpertOffsets& rows, const void* xe, const void* a);
  cuda::Fp8Kept take_codes(const void* xe, const void* a);
  cuda::Fp8Transposed keep_in(KeptMap& kept, const void* operand, const Fp8KeptBytes& bytes);
  cuda::ExpertGemmLists gemm_lists_;  // the expert GEMM lists, reused every step
  bool sm90_ = false;                 // the device runs the grouped sm90 kernel
};

}  // namespace moe
