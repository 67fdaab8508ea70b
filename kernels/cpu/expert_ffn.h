#pragma once
// The SwiGLU expert FFN over expert-major rows, as grouped GEMMs (one GEMM per local expert), and
// its backward. Weights are the FSDP-gathered full weights of this rank's experts.
#include <cstdint>

#include "core/workload.h"

namespace moe::cpu {

// a [n, F] = silu(h[:, :F]) * h[:, F:] for h [n, 2F], fp32 math, stored as dtype.
void swiglu_fwd(const float* h, int64_t n, int64_t F, DType dtype, float* a);
// dh [n, 2F] = [da * u * silu'(g), da * silu(g)] for g = h[:, :F], u = h[:, F:]; stored as dtype.
void swiglu_bwd(const float* da, const float* h, int64_t n, int64_t F, DType dtype, float* dh);

// row_offsets [E_local + 1]: expert l owns rows [row_offsets[l], row_offsets[l+1]). precision:
// how every GEMM multiplies (an FP8 one quantizes each expert's operands first, core/fp8.h).
// xe [R, H], w_in [E_local, H, 2F], w_out [E_local, F, H] -> h [R, 2F], a [R, F], ye [R, H].
// xe_quantized (FP8 only): xe holds FP8 values already (dispatch_dtype fp8), multiplied as they
// are.
void expert_ffn_fwd(const float* xe, const float* w_in, const float* w_out,
                    const int64_t* row_offsets, int64_t E_local, int64_t H, int64_t F, DType dtype,
                    float* h, float* a, float* ye, Precision precision = Precision::kBf16,
                    bool xe_quantized = false);

// dye [R, H] -> dxe [R, H] (stored as dtype); dw_in [E_local, H, 2F] and dw_out [E_local, F, H]
// accumulated in fp32 and stored as grad_dtype, overwritten (an expert with no rows gets zeros).
// da [R, F] and dh [R, 2F] are scratch.
// Its two halves (the backends' order: the all-to-all of dxe may run beside the second):
// da, dh and dxe; then dw_in and dw_out from xe, a, dye and dh, overwritten or, with accumulate
// (grad_dtype fp32), added to what they hold (an expert with no rows leaves them as they are).
void expert_ffn_bwd_data(const float* dye, const float* h, const float* w_in, const float* w_out,
                         const int64_t* row_offsets, int64_t E_local, int64_t H, int64_t F,
                         DType dtype, float* da, float* dh, float* dxe,
                         Precision precision = Precision::kBf16);
void expert_ffn_bwd_weights(const float* dye, const float* xe, const float* a, const float* dh,
                            const int64_t* row_offsets, int64_t E_local, int64_t H, int64_t F,
                            DType grad_dtype, float* dw_in, float* dw_out, bool accumulate,
                            Precision precision = Precision::kBf16);
void expert_ffn_bwd(const float* dye, const float* xe, const float* h, const float* a,
                    const float* w_in, const float* w_out, const int64_t* row_offsets,
                    int64_t E_local, int64_t H, int64_t F, DType dtype, DType grad_dtype, float* da,
                    float* dh, float* dxe, float* dw_in, float* dw_out);

}  // namespace moe::cpu
