#pragma once
// The expert FFN with FP8 GEMMs (precision fp8_tensor or fp8_block): kernels/cuda/expert_ffn.h's
// three functions, each of their six GEMMs quantizing its activation operands as core/fp8.h
// defines (kernels/cuda/fp8_quantize.h) on the caller's stream and running cuBLASLt's FP8 matmul
// once per expert, spread over the GemmRunner's side streams (GemmRunner::grouped_fp8), or, with
// the method grouped_sm90, one launch of the grouped kernel for all experts, with either
// recipe's scales (GemmRunner::grouped_sm90_fp8): the CUDA
// twin of kernels/cpu/expert_ffn.h with a precision. The weights come quantized, both ways round,
// once per step (quantize_ffn_weights_fp8), as FP8 training quantizes them once per optimizer
// step: the codes are the same whichever GEMM reads them. SwiGLU and its backward are the bf16
// path's kernels, so h and da are stored in bf16 before them, as the reference assumes. cuBLASLt's
// calls need the row offsets on the host (not a sync-free step); the grouped kernel reads them on
// the GPU, so FP8 on it runs in the sync-free step too. Every expert's rows must start at a
// multiple of 16 (align), because Hopper's FP8 kernels and TMA read 16-byte aligned operands, which
// the weight gradients' transposed operands are only there.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/fp8.h"
#include "core/fp8_buffers.h"
#include "core/ops.h"
#include "kernels/cuda/expert_ffn.h"

namespace moe::cuda {

class GemmRunner;

// An FFN's two weights quantized once per step, both ways round (fp8_quantize.h
// quantize_weight_fp8): w_in [G, H, 2F] and w_out [G, F, H], each as stored (the GEMM's B with
// N = P, K = Q for a weight [P, Q]) and transposed (N = Q, K = P), with their scales.
struct Fp8Weight {
  const uint8_t* stored = nullptr;
  const float* stored_scales = nullptr;
  const uint8_t* transposed = nullptr;
  const float* transposed_scales = nullptr;
};
struct Fp8Weights {
  Fp8Weight in, out;
};
// The device memory an Fp8Weights of G experts takes, codes and scales (core/fp8_buffers.h).
using moe::fp8_weights_bytes;
// Quantizes w_in, w_out (bf16) into `base` (fp8_weights_bytes of it) and says where each part sits.
Fp8Weights quantize_ffn_weights_fp8(const void* w_in, const void* w_out, int64_t G, int64_t H,
                                    int64_t F, Fp8Recipe recipe, void* base, cudaStream_t stream);
// Expert `first` onwards of a quantized FFN.
Fp8Weights fp8_weights_from(const Fp8Weights& w, int64_t first, int64_t H, int64_t F,
                            Fp8Recipe recipe);

// Device scratch for the quantized activation operands and their scales: `a`, the rows operand
// of the GEMM at hand (as stored, or a weight gradient's first operand transposed); dy_t and dh_t,
// dye's and dh's transposed codes, which the data-gradient GEMMs' quantization writes in the same
// pass as their rows (one read of each) for the weight gradients that follow on the same stream.
struct Fp8Scratch {
  uint8_t* a = nullptr;
  uint8_t* dy_t = nullptr;
  uint8_t* dh_t = nullptr;
  float* a_scales = nullptr;
  float* dy_t_scales = nullptr;
  float* dh_t_scales = nullptr;
};
// The most bytes each part of Fp8Scratch holds for these shapes (rows_bound: the expert-major
// rows, padding included), and a kept Fp8Transposed of xe or a: core/fp8_buffers.h.
using moe::fp8_scratch_bytes;
using moe::Fp8ScratchBytes;

// An operand's transposed codes and their scales. Null codes: none.
struct Fp8Transposed {
  uint8_t* codes = nullptr;
  float* scales = nullptr;
};
// A kept operand's codes and scales in one allocation of bytes.total() at base.
inline Fp8Transposed kept_codes_at(void* base, const Fp8KeptBytes& bytes) {
  auto* codes = static_cast<uint8_t*>(base);
  return {codes, reinterpret_cast<float*>(codes + bytes.codes_padded())};
}
// The scratch with a weight gradient's first operand (a, a_scales) taken from codes kept for it.
inline Fp8Scratch with_first_operand(Fp8Scratch sc, const Fp8Transposed& kept) {
  sc.a = kept.codes;
  sc.a_scales = kept.scales;
  return sc;
}
// The weight gradients' first operands, xe's (w_in's) and a's (w_out's) transposed codes, kept
// from the forward: its quantizations of xe and a write them in the same read as the row codes
// (both ways round, as TransformerEngine's rowwise and columnwise data), so that the weight
// gradients do not read xe and a again.
struct Fp8Kept {
  Fp8Transposed xe_t, a_t;
};

// As expert_ffn_fwd: xe [R, H] (bf16), the FFN's weights quantized -> h, a, ye. xe_packed
// (dispatch_dtype fp8, kBlock): xe holds the dispatched packed rows (core/fp8.h fp8_row_bytes),
// whose codes and scales the up projection takes as they are (no xe_t kept from them). keep:
// where xe's and a's transposed codes go for the weight gradients (none where null).
void expert_ffn_fwd_fp8(const void* xe, const Fp8Weights& w, const ExpertOffsets& rows,
                        int64_t E_local, int64_t H, int64_t F, Fp8Recipe recipe, void* h, void* a,
                        void* ye, GemmRunner& gemm, const Fp8Scratch& scratch, cudaStream_t stream,
                        bool xe_packed = false, const Fp8Kept& keep = {}, float* report = nullptr);
// As expert_ffn_bwd_data: dye -> da, dh, dxe.
void expert_ffn_bwd_data_fp8(const void* dye, const void* h, const Fp8Weights& w,
                             const ExpertOffsets& rows, int64_t E_local, int64_t H, int64_t F,
                             Fp8Recipe recipe, void* da, void* dh, void* dxe, GemmRunner& gemm,
                             const Fp8Scratch& scratch, cudaStream_t stream,
                             float* report = nullptr);
// report (device, fp8_tensor; null: none): the per-tensor scales each expert's operands were
// quantized with, [kNumFp8Computed][E_local] (core/fp8_scales.h): a from the forward, dy and dh
// from the data gradients, copied from the scratch on the stream (Ops::report_fp8_scales). An
// expert without rows reports 1, the scale of nothing.
void report_tensor_scales(const float* scales, int64_t E_local, float* to, cudaStream_t stream);
// As expert_ffn_bwd_weights: dw_in, dw_out in grad_dtype, overwritten or (fp32) accumulated.
// dye and dh: with dy_dh_left true they are not read, but taken as the transposed codes the
// expert_ffn_bwd_data_fp8 call before it on this stream, with these rows, left in scratch;
// otherwise quantized here (rows gathered since, a pipelined step's). xe_packed: xe as
// expert_ffn_fwd_fp8 took it, dw_in from its values in bf16. kept: xe's and a's transposed codes
// as the forward on these rows kept them (that operand is not read), or none.
void expert_ffn_bwd_weights_fp8(const void* xe, const void* a, const void* dye, const void* dh,
                                bool dy_dh_left, const ExpertOffsets& rows, int64_t E_local,
                                int64_t H, int64_t F, Fp8Recipe recipe, DType grad_dtype,
                                void* dw_in, void* dw_out, bool accumulate, GemmRunner& gemm,
                                const Fp8Scratch& scratch, cudaStream_t stream,
                                bool xe_packed = false, const Fp8Kept& kept = {});

// The six GEMMs' halves apart, for `moebench gemm`: the activation operands' quantization of
// GEMM `which` (X its rows operand as the FFN functions name it: xe, a, dye, dh, a, xe for up,
// down, dgrad_a, dgrad_x, wgrad_out, wgrad_in), and the FP8 GEMM on what it left in
// scratch. dgrad_a and dgrad_x also leave dye's and dh's transposed codes for wgrad_out and
// wgrad_in, which quantize only their first operand: run them in that order. amax_ready
// (fp8_tensor, down and dgrad_x): the scratch's scales already hold X's per-expert amax bits,
// from amax_into_scales given to the SwiGLU kernel that wrote X. keep_t (up and down only): X's
// transposed codes too, in the same read, for the weight gradient that takes X as its first
// operand (wgrad_in, wgrad_out).
void quantize_fp8_gemm_operands(ExpertGemm which, const void* X, const ExpertOffsets& rows,
                                int64_t E_local, int64_t H, int64_t F, Fp8Recipe recipe,
                                const Fp8Scratch& scratch, cudaStream_t stream,
                                bool amax_ready = false, const Fp8Transposed& keep_t = {});
// fp8_tensor: a GroupAmax for the SwiGLU kernel that writes the next operand (a or dh), into the
// scratch's scales (zeroed here), so that its quantization skips its own pass over it; fp8_block:
// none (its amaxes are per block, found by the quantization's tile pass).
GroupAmax amax_into_scales(const ExpertOffsets& rows, int64_t E_local, Fp8Recipe recipe,
                           const Fp8Scratch& scratch, cudaStream_t stream);
void run_fp8_gemm(ExpertGemm which, const Fp8Weights& w, const ExpertOffsets& rows, int64_t E_local,
                  int64_t H, int64_t F, Fp8Recipe recipe, DType grad_dtype, bool accumulate,
                  void* C, GemmRunner& gemm, const Fp8Scratch& scratch, cudaStream_t stream);

}  // namespace moe::cuda
