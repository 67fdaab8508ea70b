#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "core/error.h"
#include "kernels/cuda/fp8_quantize.h"
#include "kernels/cuda/launch.cuh"

namespace moe::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int64_t kB = kFp8Block;  // the block recipe's edge, 128

__device__ inline float scale_of(float amax) { return amax > 0.0f ? amax / kE4m3Max : 1.0f; }
// The e4m3 code of v / scale: round to nearest even, saturating to +-448 (core/fp8.h e4m3_round).
__device__ inline uint8_t code_of(float v, float scale) { return __nv_fp8_e4m3(v / scale).__x; }

__device__ inline float warp_max(float v) {
  for (int d = 16; d > 0; d /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, d));
  return v;
}

// Per-tensor amax of each group's elements into amax_bits[kTensorScaleStride * g] (zeroed): group g
// spans elements [offsets[g] * K, offsets[g + 1] * K), or without offsets [g * group_elems, (g + 1)
// * group_elems). Non-negative floats order as their bits do, so an integer max is exact.
__global__ void group_amax_kernel(const bf16* X, const int64_t* offsets, int64_t K,
                                  int64_t group_elems, unsigned* amax_bits) {
  const int64_t g = blockIdx.y;
  const int64_t begin = offsets ? offsets[g] * K : g * group_elems;
  const int64_t end = offsets ? offsets[g + 1] * K : (g + 1) * group_elems;
  float m = 0.0f;
  for (int64_t i = begin + blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < end;
       i += int64_t(gridDim.x) * blockDim.x)
    m = fmaxf(m, fabsf(__bfloat162float(X[i])));
  __shared__ float warps[kThreads / 32];
  m = warp_max(m);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < blockDim.x / 32 ? warps[threadIdx.x] : 0.0f;
    m = warp_max(m);
    if (threadIdx.x == 0 && m > 0.0f)
      atomicMax(&amax_bits[kTensorScaleStride * g], __float_as_uint(m));
  }
}

// Each group's scale from the amax whose bits its place holds.
__global__ void amax_to_scale_kernel(float* scales, int64_t G) {
  const int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (g < G) {
    float& s = scales[kTensorScaleStride * g];
    s = scale_of(__uint_as_float(reinterpret_cast<unsigned&>(s)));
  }
}

// One warp per (row, 128-wide block of it): the block's scale (kBlock: its amax; kTensor: its
// group's), then its codes.
__global__ void quantize_rows_kernel(const bf16* X, const int64_t* offsets, int64_t G, int64_t K,
                                     bool block, uint8_t* q, float* scales) {
  const int64_t Kb = (K + kB - 1) / kB, total = offsets[G] * Kb;
  const int lane = threadIdx.x % 32;
  for (int64_t w = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; w < total;
       w += int64_t(gridDim.x) * blockDim.x / 32) {
    const int64_t r = w / Kb, kb = w % Kb, g = last_at_or_below(offsets, G, r);
    float v[kB / 32], m = 0.0f;
#pragma unroll
    for (int j = 0; j < kB / 32; ++j) {
      const int64_t c = kb * kB + j * 32 + lane;
      v[j] = c < K ? __bfloat162float(X[r * K + c]) : 0.0f;
      m = fmaxf(m, fabsf(v[j]));
    }
    float s;
    if (block) {
      s = scale_of(warp_max(m));
      const int64_t n = offsets[g + 1] - offsets[g];
      if (lane == 0) scales[Kb * offsets[g] + kb * n + (r - offsets[g])] = s;
    } else {
      s = scales[kTensorScaleStride * g];
    }
#pragma unroll
    for (int j = 0; j < kB / 32; ++j) {
      const int64_t c = kb * kB + j * 32 + lane;
      if (c < K) q[r * K + c] = code_of(v[j], s);
    }
  }
}

constexpr int kColStripe = 32;  // columns of X per block of quantize_cols_kernel

// One block of kThreads per (128-row block of a group, 32-column stripe): the tile through shared
// memory, each column's scale (kBlock: its amax over the block's rows; kTensor: the group's), and
// the codes written transposed, consecutive threads on consecutive rows.
__global__ void quantize_cols_kernel(const bf16* X, const int64_t* offsets, int64_t G, int64_t M,
                                     bool block, uint8_t* qt, int64_t ld, float* scales) {
  // This block's group g and its row block kb there; blocks before g's, for the scales' place.
  int64_t idx = blockIdx.x, before = 0, g = -1, kb = 0;
  for (int64_t h = 0; h < G; ++h) {
    const int64_t nb = (offsets[h + 1] - offsets[h] + kB - 1) / kB;
    if (idx < nb) {
      g = h;
      kb = idx;
      break;
    }
    idx -= nb;
    before += nb;
  }
  if (g < 0) return;  // the grid is sized for the most row blocks any routing gives
  const int64_t r0 = offsets[g] + kb * kB, r1 = min(offsets[g + 1], r0 + kB);
  const int64_t m0 = int64_t(blockIdx.y) * kColStripe;
  __shared__ float tile[kB][kColStripe + 1];
  __shared__ float col_scale[kColStripe];
  for (int i = threadIdx.x; i < kB * kColStripe; i += blockDim.x) {
    const int64_t r = r0 + i / kColStripe, m = m0 + i % kColStripe;
    tile[i / kColStripe][i % kColStripe] = r < r1 && m < M ? __bfloat162float(X[r * M + m]) : 0.0f;
  }
  __syncthreads();
  if (block) {
    // 8 threads per column, 16 rows each, reduced inside their warp.
    constexpr int kPer = kThreads / kColStripe;
    const int c = threadIdx.x / kPer, part = threadIdx.x % kPer;
    float m = 0.0f;
    for (int rr = part * (kB / kPer); rr < (part + 1) * (kB / kPer); ++rr)
      m = fmaxf(m, fabsf(tile[rr][c]));
    for (int d = kPer / 2; d > 0; d /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
    if (part == 0) {
      const float s = scale_of(m);
      col_scale[c] = s;
      if (m0 + c < M) scales[M * before + kb * M + m0 + c] = s;
    }
  } else if (threadIdx.x < kColStripe) {
    col_scale[threadIdx.x] = scales[kTensorScaleStride * g];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kB * kColStripe; i += blockDim.x) {
    const int c = i / kB, rr = i % kB;
    const int64_t r = r0 + rr, m = m0 + c;
    if (r < r1 && m < M) qt[m * ld + r] = code_of(tile[rr][c], col_scale[c]);
  }
}

// One block per 128 x 128 tile of one expert's weight [P, Q]: the tile through shared memory, its
// scale (kBlock: its amax; kTensor: the expert's), its codes as [P, Q] or transposed [Q, P].
__global__ void quantize_weight_kernel(const bf16* W, int64_t P, int64_t Q, bool transpose,
                                       bool block, uint8_t* q, float* scales,
                                       int64_t scale_stride) {
  const int64_t g = blockIdx.z, pb = blockIdx.y, qb = blockIdx.x;
  const int64_t Pb = (P + kB - 1) / kB, Qb = (Q + kB - 1) / kB;
  // Tile (nb, kb) of the output [N, K] at nb * ld + kb, ld = K's tiles rounded up to 4.
  const int64_t ld = ((transpose ? Pb : Qb) + 3) / 4 * 4;
  const bf16* Wg = W + g * P * Q;
  uint8_t* qg = q + g * P * Q;
  __shared__ bf16 tile[kB][kB + 2];
  __shared__ float warps[kThreads / 32];
  __shared__ float tile_scale;
  float m = 0.0f;
  for (int i = threadIdx.x; i < kB * kB; i += blockDim.x) {
    const int64_t p = pb * kB + i / kB, c = qb * kB + i % kB;
    const bf16 v = p < P && c < Q ? Wg[p * Q + c] : __float2bfloat16(0.0f);
    tile[i / kB][i % kB] = v;
    m = fmaxf(m, fabsf(__bfloat162float(v)));
  }
  if (block) {
    m = warp_max(m);
    if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = m;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    if (block) {
      for (int w = 1; w < int(blockDim.x / 32); ++w) m = fmaxf(m, warps[w]);
      tile_scale = scale_of(fmaxf(m, warps[0]));
      scales[g * scale_stride + (transpose ? qb * ld + pb : pb * ld + qb)] = tile_scale;
    } else {
      tile_scale = scales[kTensorScaleStride * g];
    }
  }
  __syncthreads();
  const float s = tile_scale;
  for (int i = threadIdx.x; i < kB * kB; i += blockDim.x) {
    const int outer = i / kB, inner = i % kB;  // consecutive threads on consecutive outputs
    if (!transpose) {
      const int64_t p = pb * kB + outer, c = qb * kB + inner;
      if (p < P && c < Q) qg[p * Q + c] = code_of(__bfloat162float(tile[outer][inner]), s);
    } else {
      const int64_t c = qb * kB + outer, p = pb * kB + inner;
      if (p < P && c < Q) qg[c * P + p] = code_of(__bfloat162float(tile[inner][outer]), s);
    }
  }
}

// kTensor: each group's scale into scales [G] from its amax.
void group_scales(const bf16* X, const int64_t* offsets, int64_t G, int64_t K, int64_t group_elems,
                  float* scales, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(scales, 0, size_t(kTensorScaleStride * G) * sizeof(float), stream));
  const dim3 grid(64, unsigned(G));
  group_amax_kernel<<<grid, kThreads, 0, stream>>>(X, offsets, K, group_elems,
                                                   reinterpret_cast<unsigned*>(scales));
  CUDA_CHECK(cudaGetLastError());
  amax_to_scale_kernel<<<blocks_for(G), kThreads, 0, stream>>>(scales, G);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void quantize_rows_fp8(const void* X, const int64_t* offsets, int64_t G, int64_t rows_bound,
                       int64_t K, Fp8Recipe recipe, uint8_t* q, float* scales,
                       cudaStream_t stream) {
  if (G == 0 || rows_bound == 0 || K == 0) return;
  const bf16* x = static_cast<const bf16*>(X);
  const bool block = recipe == Fp8Recipe::kBlock;
  if (!block) group_scales(x, offsets, G, K, 0, scales, stream);
  const int64_t warps = rows_bound * ((K + kB - 1) / kB);
  quantize_rows_kernel<<<blocks_for(warps * 32), kThreads, 0, stream>>>(x, offsets, G, K, block, q,
                                                                        scales);
  CUDA_CHECK(cudaGetLastError());
}

int64_t cols_fp8_scale_bound(int64_t G, int64_t rows_bound, int64_t M) {
  return M * (rows_bound / kB + G);
}

void quantize_cols_fp8(const void* X, const int64_t* offsets, int64_t G, int64_t rows_bound,
                       int64_t M, Fp8Recipe recipe, uint8_t* qt, int64_t ld, float* scales,
                       cudaStream_t stream) {
  if (G == 0 || rows_bound == 0 || M == 0) return;
  MOE_CHECK(ld >= rows_bound, "quantize_cols_fp8: ld " << ld << " < rows " << rows_bound);
  const bf16* x = static_cast<const bf16*>(X);
  const bool block = recipe == Fp8Recipe::kBlock;
  if (!block) group_scales(x, offsets, G, M, 0, scales, stream);
  // Each group's row blocks, however the rows fall: at most rows_bound / 128 + G of them.
  const dim3 grid(unsigned(rows_bound / kB + G), unsigned((M + kColStripe - 1) / kColStripe));
  quantize_cols_kernel<<<grid, kThreads, 0, stream>>>(x, offsets, G, M, block, qt, ld, scales);
  CUDA_CHECK(cudaGetLastError());
}

int64_t weight_fp8_scale_stride(int64_t P, int64_t Q) {
  auto up4 = [](int64_t x) { return (x + 3) / 4 * 4; };
  return up4((P + kB - 1) / kB) * up4((Q + kB - 1) / kB);
}

void quantize_weight_fp8(const void* W, int64_t G, int64_t P, int64_t Q, bool transpose,
                         Fp8Recipe recipe, uint8_t* q, float* scales, cudaStream_t stream) {
  if (G == 0 || P == 0 || Q == 0) return;
  const bf16* w = static_cast<const bf16*>(W);
  const bool block = recipe == Fp8Recipe::kBlock;
  if (!block) group_scales(w, nullptr, G, 1, P * Q, scales, stream);
  const dim3 grid(unsigned((Q + kB - 1) / kB), unsigned((P + kB - 1) / kB), unsigned(G));
  quantize_weight_kernel<<<grid, kThreads, 0, stream>>>(w, P, Q, transpose, block, q, scales,
                                                        weight_fp8_scale_stride(P, Q));
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace moe::cuda
