#pragma once
// The shared experts' results joining the routed path's (MATH.md "Shared experts"): each shared
// expert's rows for all of a rank's tokens, [S, n] with n = T * H, added element by element. The
// order of the sums is fixed (the stored value first, then s = 0, 1, ...), so the CUDA twin
// (kernels/cuda/shared_sum.h) gives the same bits.
#include <cstdint>

#include "core/workload.h"

namespace moe::cpu {

// out [n] = out + sum_s rows[s, :], summed in fp32 from the stored values and stored as dtype:
// the routed combine's stored output plus the shared experts' outputs.
void shared_sum_out(const float* rows, int64_t S, int64_t n, DType dtype, float* out);

// acc [n] fp32 += sum_s rows[s, :]: the shared experts' data gradients into dx's fp32 sum.
void shared_sum_dx(const float* rows, int64_t S, int64_t n, float* acc);

}  // namespace moe::cpu
