#include "kernels/cpu/shared_sum.h"

#include "kernels/cpu/gemm.h"

namespace moe::cpu {

void shared_sum_out(const float* rows, int64_t S, int64_t n, DType dtype, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    float v = out[i];
    for (int64_t s = 0; s < S; ++s) v += rows[s * n + i];
    out[i] = store_as(dtype, v);
  }
}

void shared_sum_dx(const float* rows, int64_t S, int64_t n, float* acc) {
  for (int64_t i = 0; i < n; ++i) {
    float v = acc[i];
    for (int64_t s = 0; s < S; ++s) v += rows[s * n + i];
    acc[i] = v;
  }
}

}  // namespace moe::cpu
