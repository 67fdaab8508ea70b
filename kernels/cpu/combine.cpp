#include "kernels/cpu/combine.h"

#include "kernels/cpu/gemm.h"

namespace moe::cpu {

void unpermute_combine(const float* y_send, const int32_t* send_pos, const float* p, int64_t T,
                       int64_t K, int64_t H, DType out_dtype, float* out) {
  for (int64_t t = 0; t < T; ++t) {
    float* o = out + t * H;
    for (int64_t h = 0; h < H; ++h) o[h] = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      if (send_pos[t * K + k] < 0) continue;  // dropped by the capacity: adds nothing
      const float w = p[t * K + k];
      const float* y = y_send + int64_t(send_pos[t * K + k]) * H;
      for (int64_t h = 0; h < H; ++h) o[h] += w * y[h];
    }
    for (int64_t h = 0; h < H; ++h) o[h] = store_as(out_dtype, o[h]);
  }
}

void unpermute_combine_bwd(const float* dout, const float* y_send, const int32_t* send_pos,
                           const float* p, int64_t T, int64_t K, int64_t H, DType dtype,
                           float* dy_send, float* dp) {
  for (int64_t t = 0; t < T; ++t) {
    const float* g = dout + t * H;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t row = send_pos[t * K + k];
      if (row < 0) {  // dropped: the output does not depend on its weight
        dp[t * K + k] = 0.0f;
        continue;
      }
      const float w = p[t * K + k];
      const float* y = y_send + row * H;
      float* dy = dy_send + row * H;
      float dot = 0.0f;
      for (int64_t h = 0; h < H; ++h) {
        dot += y[h] * g[h];
        dy[h] = store_as(dtype, w * g[h]);
      }
      dp[t * K + k] = dot;
    }
  }
}

void unpermute_sum(const float* dx_send, const int32_t* send_pos, int64_t T, int64_t K, int64_t H,
                   float* dx_acc) {
  for (int64_t t = 0; t < T; ++t) {
    float* d = dx_acc + t * H;
    for (int64_t h = 0; h < H; ++h) d[h] = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      if (send_pos[t * K + k] < 0) continue;
      const float* src = dx_send + int64_t(send_pos[t * K + k]) * H;
      for (int64_t h = 0; h < H; ++h) d[h] += src[h];
    }
  }
}

void unpermute_sum_storage(const float* dx_send, const int32_t* send_pos, int64_t T, int64_t K,
                           int64_t H, DType out_dtype, float* out) {
  unpermute_sum(dx_send, send_pos, T, K, H, out);
  for (int64_t i = 0; i < T * H; ++i) out[i] = store_as(out_dtype, out[i]);
}

}  // namespace moe::cpu
