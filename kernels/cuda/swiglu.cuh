#pragma once
// SwiGLU's arithmetic, one definition for the SwiGLU kernels (expert_ffn.cu) and the grouped
// GEMM's fused epilogues (grouped_gemm.cu): fused and separate kernels give the same bits only if
// they evaluate the same expressions.
#include <cuda_runtime.h>

namespace moe::cuda {

__device__ __forceinline__ float swiglu_sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

// a = silu(g) * u.
__device__ __forceinline__ float swiglu_value(float g, float u) {
  return g * swiglu_sigmoid(g) * u;
}

// The gradients of a = silu(g) * u given da = d: dg = d * u * silu'(g), du = d * silu(g).
__device__ __forceinline__ void swiglu_grads(float d, float g, float u, float& dg, float& du) {
  const float sg = swiglu_sigmoid(g);
  dg = d * u * (sg * (1.0f + g * (1.0f - sg)));
  du = d * (g * sg);
}

}  // namespace moe::cuda
