#pragma once
// CUDA twin of the SwiGLU in kernels/cpu/expert_ffn.h (forward and backward), between the expert
// GEMMs. Same results as the twin (floats to the last bf16 ulp); storage tensors are bf16 or fp32
// per `dtype`; all launches go on `stream`.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/workload.h"

namespace moe::cuda {

void swiglu_fwd(const void* h, int64_t n, int64_t F, DType dtype, void* a, cudaStream_t stream);
void swiglu_bwd(const void* da, const void* h, int64_t n, int64_t F, DType dtype, void* dh,
                cudaStream_t stream);

}  // namespace moe::cuda
