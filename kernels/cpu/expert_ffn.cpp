#include "kernels/cpu/expert_ffn.h"

#include <cmath>

#include "core/error.h"
#include "kernels/cpu/gemm.h"

namespace moe::cpu {
namespace {

inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// One of the FFN's grouped GEMMs at the workload's precision.
void ffn_gemm(Precision precision, GroupedLayout layout, const int64_t* offsets, int64_t G,
              int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C,
              DType out_dtype, bool accumulate = false, bool a_quantized = false) {
  if (precision == Precision::kBf16)
    grouped_gemm(layout, G, offsets, M, N, K, A, B, C, out_dtype, accumulate);
  else
    grouped_gemm_fp8(layout, G, offsets, M, N, K, A, B, C, out_dtype, fp8_recipe_of(precision),
                     accumulate, a_quantized);
}

}  // namespace

void swiglu_fwd(const float* h, int64_t n, int64_t F, DType dtype, float* a) {
  for (int64_t r = 0; r < n; ++r) {
    const float* g = h + r * 2 * F;
    const float* u = g + F;
    for (int64_t j = 0; j < F; ++j) a[r * F + j] = store_as(dtype, g[j] * sigmoid(g[j]) * u[j]);
  }
}

void swiglu_bwd(const float* da, const float* h, int64_t n, int64_t F, DType dtype, float* dh) {
  for (int64_t r = 0; r < n; ++r) {
    const float* g = h + r * 2 * F;
    const float* u = g + F;
    float* dg = dh + r * 2 * F;
    float* du = dg + F;
    for (int64_t j = 0; j < F; ++j) {
      const float sg = sigmoid(g[j]);
      const float silu = g[j] * sg;
      const float dsilu = sg * (1.0f + g[j] * (1.0f - sg));
      const float d = da[r * F + j];
      dg[j] = store_as(dtype, d * u[j] * dsilu);
      du[j] = store_as(dtype, d * silu);
    }
  }
}

// Each GEMM over all groups at once, as the CUDA backend's grouped kernel: the same per-expert
// products, so the same values as a loop over experts.
void expert_ffn_fwd(const float* xe, const float* w_in, const float* w_out,
                    const int64_t* row_offsets, int64_t E_local, int64_t H, int64_t F, DType dtype,
                    float* h, float* a, float* ye, Precision precision, bool xe_quantized) {
  const int64_t rows = row_offsets[E_local];
  ffn_gemm(precision, GroupedLayout::kRowsTimesWeight, row_offsets, E_local, 0, 2 * F, H, xe, w_in,
           h, dtype, false, xe_quantized);
  swiglu_fwd(h, rows, F, dtype, a);
  ffn_gemm(precision, GroupedLayout::kRowsTimesWeight, row_offsets, E_local, 0, H, F, a, w_out, ye,
           dtype);
}

void expert_ffn_bwd_data(const float* dye, const float* h, const float* w_in, const float* w_out,
                         const int64_t* row_offsets, int64_t E_local, int64_t H, int64_t F,
                         DType dtype, float* da, float* dh, float* dxe, Precision precision) {
  const int64_t rows = row_offsets[E_local];
  ffn_gemm(precision, GroupedLayout::kRowsTimesWeightT, row_offsets, E_local, 0, F, H, dye, w_out,
           da, dtype);
  swiglu_bwd(da, h, rows, F, dtype, dh);
  ffn_gemm(precision, GroupedLayout::kRowsTimesWeightT, row_offsets, E_local, 0, H, 2 * F, dh, w_in,
           dxe, dtype);
}

void expert_ffn_bwd_weights(const float* dye, const float* xe, const float* a, const float* dh,
                            const int64_t* row_offsets, int64_t E_local, int64_t H, int64_t F,
                            DType grad_dtype, float* dw_in, float* dw_out, bool accumulate,
                            Precision precision) {
  // A bf16 sum of partial sums would round at every addition, unlike one fp32 sum rounded once.
  MOE_CHECK(
      !accumulate || grad_dtype == DType::kFp32,
      "expert_ffn_bwd_weights: accumulating needs fp32 gradients, got " << dtype_name(grad_dtype));
  // Weight gradients in grad_dtype (kept for the FSDP reduce-scatter); no rows give zeros.
  // FP8: 128 x 1 blocks down each expert's rows, in their expert-major order (by source rank,
  // then token: every dispatcher's), padding rows last (zeros: they change no block's amax).
  ffn_gemm(precision, GroupedLayout::kRowsTTimesRows, row_offsets, E_local, F, H, 0, a, dye, dw_out,
           grad_dtype, accumulate);
  ffn_gemm(precision, GroupedLayout::kRowsTTimesRows, row_offsets, E_local, H, 2 * F, 0, xe, dh,
           dw_in, grad_dtype, accumulate);
}

void expert_ffn_bwd(const float* dye, const float* xe, const float* h, const float* a,
                    const float* w_in, const float* w_out, const int64_t* row_offsets,
                    int64_t E_local, int64_t H, int64_t F, DType dtype, DType grad_dtype, float* da,
                    float* dh, float* dxe, float* dw_in, float* dw_out) {
  expert_ffn_bwd_data(dye, h, w_in, w_out, row_offsets, E_local, H, F, dtype, da, dh, dxe);
  expert_ffn_bwd_weights(dye, xe, a, dh, row_offsets, E_local, H, F, grad_dtype, dw_in, dw_out,
                         false);
}

}  // namespace moe::cpu
