#pragma once
// Storage element types on the GPU: bf16 (__nv_bfloat16) or fp32, read and written through fp32.
#include <cuda_bf16.h>

#include "core/workload.h"

namespace moe::cuda {

__device__ __forceinline__ float load_f(const float* p) { return *p; }
__device__ __forceinline__ float load_f(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_f(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_f(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// Bytes of one element of dtype on the device.
inline size_t stored_bytes(DType t) {
  return t == DType::kBf16 ? sizeof(__nv_bfloat16) : sizeof(float);
}

// N consecutive elements as floats. N = 1 is a plain load; N a multiple of 16 bytes' worth
// (4 floats, 8 bf16) moves 16 bytes per instruction and needs p 16-byte aligned. The values are
// exactly those of N load_f / store_f calls, so a kernel's arithmetic does not depend on N.
template <int N>
__device__ __forceinline__ void load_n(const float* p, float* v) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const float4 f = *reinterpret_cast<const float4*>(p + i);
      v[i] = f.x, v[i + 1] = f.y, v[i + 2] = f.z, v[i + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = p[i];
  }
}
template <int N>
__device__ __forceinline__ void load_n(const __nv_bfloat16* p, float* v) {
  if constexpr (N % 8 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 8) {
      const uint4 u = *reinterpret_cast<const uint4*>(p + i);
      const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float2 f = __bfloat1622float2(b[q]);
        v[i + 2 * q] = f.x, v[i + 2 * q + 1] = f.y;
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = __bfloat162float(p[i]);
  }
}
template <int N>
__device__ __forceinline__ void store_n(float* p, const float* v) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4)
      *reinterpret_cast<float4*>(p + i) = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) p[i] = v[i];
  }
}
template <int N>
__device__ __forceinline__ void store_n(__nv_bfloat16* p, const float* v) {
  if constexpr (N % 8 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 8) {
      uint4 u;
      __nv_bfloat162* b = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
      for (int q = 0; q < 4; ++q) b[q] = __floats2bfloat162_rn(v[i + 2 * q], v[i + 2 * q + 1]);
      *reinterpret_cast<uint4*>(p + i) = u;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) p[i] = __float2bfloat16_rn(v[i]);
  }
}

// Elements of T in 16 bytes: the widest N of load_n / store_n.
template <class T>
constexpr int kPack16 = int(16 / sizeof(T));

// Calls fn with a null pointer of the storage type of `dtype`, so one launcher serves both.
template <class Fn>
void with_storage(DType dtype, Fn&& fn) {
  if (dtype == DType::kBf16)
    fn(static_cast<__nv_bfloat16*>(nullptr));
  else
    fn(static_cast<float*>(nullptr));
}

}  // namespace moe::cuda
