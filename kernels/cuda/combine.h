#pragma once
// CUDA twin of kernels/cpu/combine.h: each token's weighted sum of its expert outputs, its
// backward, and the sum of the returned data gradients. Same names, argument order and results as
// the twin (floats to the last bf16 ulp); storage tensors are bf16 or fp32 per `dtype`; all
// launches go on `stream`.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/workload.h"

namespace moe::cuda {

// A row with send_pos -1 (dropped by the capacity) adds nothing; its dp is 0.
void unpermute_combine(const void* y_send, const int32_t* send_pos, const float* p, int64_t T,
                       int64_t K, int64_t H, DType dtype, void* out, cudaStream_t stream);
// The same sums, stored in fp32 (no rounding to dtype): the twin is unpermute_combine with
// out_dtype kFp32.
void unpermute_combine_f32(const void* y_send, const int32_t* send_pos, const float* p, int64_t T,
                           int64_t K, int64_t H, DType dtype, float* out, cudaStream_t stream);
void unpermute_combine_bwd(const void* dout, const void* y_send, const int32_t* send_pos,
                           const float* p, int64_t T, int64_t K, int64_t H, DType dtype,
                           void* dy_send, float* dp, cudaStream_t stream);
void unpermute_sum(const void* dx_send, const int32_t* send_pos, int64_t T, int64_t K, int64_t H,
                   DType dtype, float* dx_acc, cudaStream_t stream);

// unpermute_sum's fp32 sums stored in dtype (rounded once): out [T, H] storage.
void unpermute_sum_storage(const void* dx_send, const int32_t* send_pos, int64_t T, int64_t K,
                           int64_t H, DType dtype, void* out, cudaStream_t stream);

}  // namespace moe::cuda
