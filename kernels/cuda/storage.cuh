#pragma once
// Storage element types on the GPU: bf16 (__nv_bfloat16) or fp32, read and written through fp32.
#include <cuda_bf16.h>

#include "core/workload.h"

namespace moe::cuda {

__device__ __forceinline__ float load_f(const float* p) { return *p; }
__device__ __forceinline__ float load_f(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_f(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_f(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// Calls fn with a null pointer of the storage type of `dtype`, so one launcher serves both.
template <class Fn>
void with_storage(DType dtype, Fn&& fn) {
  if (dtype == DType::kBf16)
    fn(static_cast<__nv_bfloat16*>(nullptr));
  else
    fn(static_cast<float*>(nullptr));
}

}  // namespace moe::cuda
