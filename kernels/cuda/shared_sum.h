#pragma once
// CUDA twin of kernels/cpu/shared_sum.h: the shared experts' rows [S, n] (storage) summed into
// out (storage) or into dx's fp32 sum, in the twin's order, so the results are bitwise equal.
// Storage tensors are bf16 or fp32 per `dtype`; all launches go on `stream`.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/workload.h"

namespace moe::cuda {

void shared_sum_out(const void* rows, int64_t S, int64_t n, DType dtype, void* out,
                    cudaStream_t stream);
void shared_sum_dx(const void* rows, int64_t S, int64_t n, DType dtype, float* acc,
                   cudaStream_t stream);

}  // namespace moe::cuda
