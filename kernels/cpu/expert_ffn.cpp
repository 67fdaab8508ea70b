#include "kernels/cpu/expert_ffn.h"

#include <cmath>

#include "kernels/cpu/gemm.h"

namespace moe::cpu {
namespace {

inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

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

void expert_ffn_fwd(const float* xe, const float* w_in, const float* w_out,
                    const int64_t* row_offsets, int64_t E_local, int64_t H, int64_t F, DType dtype,
                    float* h, float* a, float* ye) {
  for (int64_t l = 0; l < E_local; ++l) {
    const int64_t r0 = row_offsets[l], n = row_offsets[l + 1] - r0;
    if (n == 0) continue;
    gemm(false, false, n, 2 * F, H, xe + r0 * H, w_in + l * H * 2 * F, h + r0 * 2 * F, false,
         dtype);
    swiglu_fwd(h + r0 * 2 * F, n, F, dtype, a + r0 * F);
    gemm(false, false, n, H, F, a + r0 * F, w_out + l * F * H, ye + r0 * H, false, dtype);
  }
}

void expert_ffn_bwd_data(const float* dye, const float* h, const float* w_in, const float* w_out,
                         const int64_t* row_offsets, int64_t E_local, int64_t H, int64_t F,
                         DType dtype, float* da, float* dh, float* dxe) {
  for (int64_t l = 0; l < E_local; ++l) {
    const int64_t r0 = row_offsets[l], n = row_offsets[l + 1] - r0;
    if (n == 0) continue;
    gemm(false, true, n, F, H, dye + r0 * H, w_out + l * F * H, da + r0 * F, false, dtype);
    swiglu_bwd(da + r0 * F, h + r0 * 2 * F, n, F, dtype, dh + r0 * 2 * F);
    gemm(false, true, n, H, 2 * F, dh + r0 * 2 * F, w_in + l * H * 2 * F, dxe + r0 * H, false,
         dtype);
  }
}

void expert_ffn_bwd_weights(const float* dye, const float* xe, const float* a, const float* dh,
                            const int64_t* row_offsets, int64_t E_local, int64_t H, int64_t F,
                            DType grad_dtype, float* dw_in, float* dw_out) {
  for (int64_t l = 0; l < E_local; ++l) {
    const int64_t r0 = row_offsets[l], n = row_offsets[l + 1] - r0;
    // Weight gradients in grad_dtype (kept for the FSDP reduce-scatter); n == 0 gives zeros.
    gemm(true, false, F, H, n, a + r0 * F, dye + r0 * H, dw_out + l * F * H, false, grad_dtype);
    gemm(true, false, H, 2 * F, n, xe + r0 * H, dh + r0 * 2 * F, dw_in + l * H * 2 * F, false,
         grad_dtype);
  }
}

void expert_ffn_bwd(const float* dye, const float* xe, const float* h, const float* a,
                    const float* w_in, const float* w_out, const int64_t* row_offsets,
                    int64_t E_local, int64_t H, int64_t F, DType dtype, DType grad_dtype, float* da,
                    float* dh, float* dxe, float* dw_in, float* dw_out) {
  expert_ffn_bwd_data(dye, h, w_in, w_out, row_offsets, E_local, H, F, dtype, da, dh, dxe);
  expert_ffn_bwd_weights(dye, xe, a, dh, row_offsets, E_local, H, F, grad_dtype, dw_in, dw_out);
}

}  // namespace moe::cpu
