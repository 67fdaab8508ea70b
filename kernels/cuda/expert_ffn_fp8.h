#pragma once
// The expert FFN with FP8 GEMMs (precision fp8_tensor or fp8_block): kernels/cuda/expert_ffn.h's
// three functions, each of their six GEMMs quantizing its operands as core/fp8.h defines
// (kernels/cuda/fp8_quantize.h) on the caller's stream and running cuBLASLt's FP8 matmul once
// per expert, spread over the GemmRunner's side streams (GemmRunner::grouped_fp8): the CUDA twin of
// kernels/cpu/expert_ffn.h with a precision. SwiGLU and its backward are the bf16 path's kernels,
// so h and da are stored in bf16 before them, as the reference assumes. Needs the row offsets on
// the host (not a sync-free step) and every expert's rows starting at a multiple of 16 (align),
// because Hopper's FP8 kernels read 16-byte aligned operands, which the weight gradients'
// transposed operands are only there.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/fp8.h"
#include "core/ops.h"

namespace moe::cuda {

class GemmRunner;

// Device scratch for one GEMM's two quantized operands and their scales.
struct Fp8Scratch {
  uint8_t* a = nullptr;
  uint8_t* b = nullptr;
  float* a_scales = nullptr;
  float* b_scales = nullptr;
};
// The most bytes each part of Fp8Scratch holds for these shapes (rows_bound: the expert-major
// rows, padding included).
struct Fp8ScratchBytes {
  size_t a = 0, b = 0, a_scales = 0, b_scales = 0;
};
Fp8ScratchBytes fp8_scratch_bytes(int64_t rows_bound, int64_t E_local, int64_t H, int64_t F);

// As expert_ffn_fwd: xe [R, H], w_in [E_local, H, 2F], w_out [E_local, F, H] (bf16) -> h, a, ye.
void expert_ffn_fwd_fp8(const void* xe, const void* w_in, const void* w_out,
                        const ExpertOffsets& rows, int64_t E_local, int64_t H, int64_t F,
                        Fp8Recipe recipe, void* h, void* a, void* ye, GemmRunner& gemm,
                        const Fp8Scratch& scratch, cudaStream_t stream);
// As expert_ffn_bwd_data: dye -> da, dh, dxe.
void expert_ffn_bwd_data_fp8(const void* dye, const void* h, const void* w_in, const void* w_out,
                             const ExpertOffsets& rows, int64_t E_local, int64_t H, int64_t F,
                             Fp8Recipe recipe, void* da, void* dh, void* dxe, GemmRunner& gemm,
                             const Fp8Scratch& scratch, cudaStream_t stream);
// As expert_ffn_bwd_weights: dw_in, dw_out in grad_dtype, overwritten or (fp32) accumulated.
void expert_ffn_bwd_weights_fp8(const void* dye, const void* xe, const void* a, const void* dh,
                                const ExpertOffsets& rows, int64_t E_local, int64_t H, int64_t F,
                                Fp8Recipe recipe, DType grad_dtype, void* dw_in, void* dw_out,
                                bool accumulate, GemmRunner& gemm, const Fp8Scratch& scratch,
                                cudaStream_t stream);

}  // namespace moe::cuda
