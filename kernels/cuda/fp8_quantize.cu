#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "core/error.h"
#include "kernels/cuda/fp8_quantize.h"
#include "kernels/cuda/launch.cuh"

namespace moe::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kB = int(kFp8Block);  // the block recipe's edge, 128: also the tile's
constexpr int kVec = 8;             // bf16 values in a 16-byte chunk
constexpr int kChunks = kB / kVec;  // chunks in a tile row
constexpr int kTileThreads = 256;
constexpr int kRowsPerPass = kTileThreads / kChunks;  // tile rows one pass of the block loads

__device__ inline float scale_of(float amax) { return amax > 0.0f ? amax / kE4m3Max : 1.0f; }
__device__ inline float value_of(const uint4& chunk, int k) {
  return __bfloat162float(reinterpret_cast<const bf16*>(&chunk)[k]);
}

// A scale and its reciprocal (fp8_quotient's).
struct Scale {
  float s = 1.0f, inv = 1.0f;
};
__device__ inline Scale scale_from(float amax) {
  const float s = scale_of(amax);
  return {s, __frcp_rn(s)};
}

// The e4m3 codes of v0 / scale and v1 / scale (core/fp8.h's quotient; round to nearest even,
// saturating to +-448 as e4m3_round), v0's in the low byte.
__device__ inline uint32_t codes_of(float v0, float v1, const Scale& sc) {
  return __nv_cvt_float2_to_fp8x2(
      make_float2(fp8_quotient(v0, sc.s, sc.inv), fp8_quotient(v1, sc.s, sc.inv)), __NV_SATFINITE,
      __NV_E4M3);
}
// Eight values' codes, the first in the lowest byte.
__device__ inline uint2 codes_of(const float (&v)[kVec], const Scale& sc) {
  return make_uint2(codes_of(v[0], v[1], sc) | codes_of(v[2], v[3], sc) << 16,
                    codes_of(v[4], v[5], sc) | codes_of(v[6], v[7], sc) << 16);
}

__device__ inline float warp_max(float v) {
  for (int d = 16; d > 0; d /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, d));
  return v;
}

// Per-tensor amax of each group's elements into amax_bits[kTensorScaleStride * g] (zeroed): group g
// spans elements [offsets[g] * K, offsets[g + 1] * K), or without offsets [g * group_elems, (g + 1)
// * group_elems); K and group_elems multiples of 8 (16-byte loads). Non-negative floats order as
// their bits do, so an integer max is exact.
__global__ void group_amax_kernel(const bf16* X, const int64_t* offsets, int64_t K,
                                  int64_t group_elems, unsigned* amax_bits) {
  const int64_t g = blockIdx.y;
  const int64_t begin = offsets ? offsets[g] * K : g * group_elems;
  const int64_t end = offsets ? offsets[g + 1] * K : (g + 1) * group_elems;
  const uint4* chunks = reinterpret_cast<const uint4*>(X);
  float m = 0.0f;
  for (int64_t i = begin / kVec + blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < end / kVec;
       i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 u = chunks[i];
#pragma unroll
    for (int k = 0; k < kVec; ++k) m = fmaxf(m, fabsf(value_of(u, k)));
  }
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

// Byte k of each of the 8 rows' 8 codes, row 0's lowest: a column of an 8 x 8 block of codes.
__device__ inline uint2 column_of(const uint2 (&rows)[8], int k) {
  // Byte k of row i sits in rows[i].x (k < 4) or .y; each __byte_perm takes it from two rows.
  const unsigned sel = unsigned(k % 4) | unsigned(k % 4 + 4) << 4;
  auto pair = [&](int i) {
    return k < 4 ? __byte_perm(rows[i].x, rows[i + 1].x, sel)
                 : __byte_perm(rows[i].y, rows[i + 1].y, sel);
  };
  return make_uint2(__byte_perm(pair(0), pair(2), 0x5410), __byte_perm(pair(4), pair(6), 0x5410));
}

// The first `valid` of 8 codes to dst: one 8-byte store where it can.
__device__ inline void store_codes(uint8_t* dst, const uint2& codes, int valid) {
  if (valid == 8 && reinterpret_cast<uintptr_t>(dst) % 8 == 0) {
    *reinterpret_cast<uint2*>(dst) = codes;
    return;
  }
  for (int i = 0; i < valid; ++i) dst[i] = uint8_t((i < 4 ? codes.x : codes.y) >> (8 * (i % 4)));
}

// How an operand's scales are cut: one per group; 1 x 128 along the reduction (each row's blocks
// as stored, each column's blocks transposed); 128 x 128 tiles (weights).
enum class Cut : uint8_t { kTensor, kAlong, kTile };

// One orientation's output.
struct Side {
  uint8_t* q = nullptr;  // null: not written
  float* scales = nullptr;
  // Transposed only: group g's codes from q + g * group_stride, rows of length ld, its row r at
  // column r - (local_rows ? the group's first row : 0).
  int64_t ld = 0, group_stride = 0;
  bool local_rows = false;
  int64_t tiles_ld = 0, tiles_stride = 0;  // kTile: the [N, K] tile layout's row, per group
};

struct TileJob {
  const bf16* X = nullptr;           // [rows, K]
  const int64_t* offsets = nullptr;  // null: group g is rows [g * group_rows, (g + 1) * group_rows)
  int64_t group_rows = 0, G = 0, K = 0;
  Cut cut = Cut::kTensor;
  const float* tensor_scales = nullptr;  // kTensor: group g's at [kTensorScaleStride * g]
  Side rows, cols;                       // codes as stored, and transposed
};

__device__ inline int64_t group_begin(const TileJob& j, int64_t g) {
  return j.offsets ? j.offsets[g] : g * j.group_rows;
}

// One block per 128 x 128 tile of one group (blockIdx.x: the group's row block, counted over the
// groups; blockIdx.y: the column block). The tile comes into shared memory once, in 16-byte
// chunks whose places are swizzled by row (chunk c of row r at c ^ (r / 8 % 8)), so that both a
// row's chunks and a column of 8 x 8 sub-blocks are read without bank conflicts; its scales; then
// its codes as stored (consecutive threads along a row) and transposed (each thread an 8 x 8
// sub-block, consecutive threads down a column), 8 bytes a store.
__global__ void __launch_bounds__(kTileThreads, 4) quantize_tile_kernel(const TileJob j) {
  int64_t g = -1, rb = 0, before = 0;  // group, row block there, row blocks of groups before g
  if (!j.offsets) {
    const int64_t per = (j.group_rows + kB - 1) / kB;
    g = blockIdx.x / per;
    rb = blockIdx.x % per;
    before = g * per;
  } else {
    int64_t idx = blockIdx.x;
    for (int64_t h = 0; h < j.G; ++h) {
      const int64_t nb = (j.offsets[h + 1] - j.offsets[h] + kB - 1) / kB;
      if (idx < nb) {
        g = h;
        rb = idx;
        break;
      }
      idx -= nb;
      before += nb;
    }
    if (g < 0) return;  // the grid is sized for the most row blocks any routing gives
  }
  const int64_t g0 = group_begin(j, g), n = group_begin(j, g + 1) - g0;
  const int64_t r0 = g0 + rb * kB, c0 = int64_t(blockIdx.y) * kB;
  const int rows = int(min(int64_t(kB), g0 + n - r0)), cols = int(min(int64_t(kB), j.K - c0));

  // The tile (bf16) and, where both orientations share one scale, its codes as stored (8-byte
  // chunks, chunk c of row r at c ^ (r / 8 % 16)), which the transposed half reads back.
  extern __shared__ uint4 smem[];
  uint4(*tile)[kChunks] = reinterpret_cast<uint4(*)[kChunks]>(smem);
  uint2(*codes)[kChunks] = reinterpret_cast<uint2(*)[kChunks]>(smem + kB * kChunks);
  __shared__ Scale row_scale[kB], col_scale[kB];
  __shared__ float col_part[kTileThreads / 32][kB];
  __shared__ float warp_amax[kTileThreads / 32];
  const int t = threadIdx.x, warp = t / 32, c8 = t % kChunks;
  const bool along = j.cut == Cut::kAlong;
  const bool reuse = !along && j.rows.q && j.cols.q;  // the transposed codes from the stored

  // Load: thread t takes chunk c8 of rows t / 16 + 16 i; the 16 threads of a row are 16 lanes.
  float tile_m = 0.0f, col_m[kVec] = {};
#pragma unroll
  for (int i = 0; i < kB / kRowsPerPass; ++i) {
    const int r = t / kChunks + i * kRowsPerPass;
    uint4 u = make_uint4(0, 0, 0, 0);
    if (r < rows && c8 * kVec < cols)
      u = *reinterpret_cast<const uint4*>(j.X + (r0 + r) * j.K + c0 + c8 * kVec);
    tile[r][c8 ^ (r / 8 % 8)] = u;
    float m = 0.0f;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float v = fabsf(value_of(u, k));
      m = fmaxf(m, v);
      col_m[k] = fmaxf(col_m[k], v);
    }
    if (along && j.rows.q) {
      for (int d = kChunks / 2; d > 0; d /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
      if (c8 == 0) {
        row_scale[r] = scale_from(m);
        const int64_t Kb = (j.K + kB - 1) / kB;
        if (r < rows) j.rows.scales[Kb * g0 + blockIdx.y * n + (r0 - g0 + r)] = row_scale[r].s;
      }
    }
    tile_m = fmaxf(tile_m, m);
  }
  if (along && j.cols.q) {
    // Lanes l and l ^ 16 hold the same chunk's columns.
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      col_m[k] = fmaxf(col_m[k], __shfl_xor_sync(0xffffffffu, col_m[k], 16));
      if (t % 32 < kChunks) col_part[warp][c8 * kVec + k] = col_m[k];
    }
  }
  if (j.cut == Cut::kTile) {
    tile_m = warp_max(tile_m);
    if (t % 32 == 0) warp_amax[warp] = tile_m;
  }
  __syncthreads();
  Scale s;  // the tile's scale where one serves the whole tile
  if (j.cut == Cut::kTensor) {
    s.s = j.tensor_scales[kTensorScaleStride * g];
    s.inv = __frcp_rn(s.s);
  } else if (j.cut == Cut::kTile) {
    float m = 0.0f;
    for (int w = 0; w < kTileThreads / 32; ++w) m = fmaxf(m, warp_amax[w]);
    s = scale_from(m);
    if (t == 0 && j.rows.scales)
      j.rows.scales[g * j.rows.tiles_stride + rb * j.rows.tiles_ld + blockIdx.y] = s.s;
    if (t == 0 && j.cols.scales)
      j.cols.scales[g * j.cols.tiles_stride + blockIdx.y * j.cols.tiles_ld + rb] = s.s;
  } else if (j.cols.q && t < kB) {
    float m = 0.0f;
    for (int w = 0; w < kTileThreads / 32; ++w) m = fmaxf(m, col_part[w][t]);
    col_scale[t] = scale_from(m);
    if (t < cols) j.cols.scales[j.K * before + rb * j.K + c0 + t] = col_scale[t].s;
  }
  if (along) __syncthreads();

  if (j.rows.q) {
#pragma unroll
    for (int i = 0; i < kB / kRowsPerPass; ++i) {
      const int r = t / kChunks + i * kRowsPerPass;
      if (r >= rows || c8 * kVec >= cols) continue;
      const uint4 u = tile[r][c8 ^ (r / 8 % 8)];
      float v[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = value_of(u, k);
      const uint2 q = codes_of(v, along ? row_scale[r] : s);
      *reinterpret_cast<uint2*>(j.rows.q + (r0 + r) * j.K + c0 + c8 * kVec) = q;
      if (reuse) codes[r][c8 ^ (r / 8 % 16)] = q;
    }
  }
  if (reuse) __syncthreads();
  if (!j.cols.q) return;
  // Sub-block rows 8 r8.., columns 8 cc..: 16 consecutive threads write 128 bytes of a row of qt.
  const int r8 = t % kChunks, cc = t / kChunks;
  if (r8 * 8 >= rows || cc * kVec >= cols) return;
  const int valid = min(8, rows - r8 * 8);
  uint8_t* dst = j.cols.q + g * j.cols.group_stride + (c0 + cc * kVec) * j.cols.ld +
                 (j.cols.local_rows ? r0 - g0 : r0) + r8 * 8;
  if (reuse) {
    uint2 q[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = codes[r8 * 8 + i][cc ^ (r8 % 16)];
#pragma unroll
    for (int k = 0; k < kVec; ++k) store_codes(dst + k * j.cols.ld, column_of(q, k), valid);
  } else {
    uint4 u[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) u[i] = tile[r8 * 8 + i][cc ^ (r8 % 8)];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      float v[kVec];
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = value_of(u[i], k);
      store_codes(dst + k * j.cols.ld, codes_of(v, along ? col_scale[cc * kVec + k] : s), valid);
    }
  }
}

// kTensor: each group's scale into scales[kTensorScaleStride * g] from its amax.
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

// kTensor's scales for a job whose outputs want them: computed into the first side's, copied to
// the second's.
void tensor_scales_for(TileJob& j, int64_t group_elems, cudaStream_t stream) {
  float* first = j.rows.q ? j.rows.scales : j.cols.scales;
  group_scales(j.X, j.offsets, j.G, j.K, group_elems, first, stream);
  if (j.rows.q && j.cols.q && j.cols.scales != first)
    CUDA_CHECK(cudaMemcpyAsync(j.cols.scales, first, size_t(kTensorScaleStride * j.G) * 4,
                               cudaMemcpyDeviceToDevice, stream));
  j.tensor_scales = first;
}

// A kBlock weight's row of 128 x 128 tiles along a dimension of n, padded to 4 (16 bytes).
int64_t tiles_ld(int64_t n) { return ((n + kB - 1) / kB + 3) / 4 * 4; }

void launch_tiles(const TileJob& j, int64_t row_blocks, cudaStream_t stream) {
  MOE_CHECK(j.K % kVec == 0, "FP8 quantization: rows of " << j.K << " values, not a multiple of "
                                                          << kVec << " (16-byte loads)");
  const dim3 grid(unsigned(row_blocks), unsigned((j.K + kB - 1) / kB));
  // The tile, and the codes' copy where both orientations share a scale.
  constexpr size_t kTileBytes = kB * kB * 2, kCodesBytes = kB * kB;
  const bool reuse = j.cut != Cut::kAlong && j.rows.q && j.cols.q;
  const size_t smem = kTileBytes + (reuse ? kCodesBytes : 0);
  static const bool opted_in = [] {
    CUDA_CHECK(cudaFuncSetAttribute(quantize_tile_kernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kTileBytes + kCodesBytes)));
    return true;
  }();
  (void)opted_in;
  quantize_tile_kernel<<<grid, kTileThreads, smem, stream>>>(j);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void quantize_rows_and_cols_fp8(const void* X, const int64_t* offsets, int64_t G,
                                int64_t rows_bound, int64_t K, Fp8Recipe recipe, uint8_t* q,
                                float* scales, uint8_t* qt, int64_t ld, float* scales_t,
                                cudaStream_t stream) {
  if (G == 0 || rows_bound == 0 || K == 0 || (!q && !qt)) return;
  MOE_CHECK(!qt || ld >= rows_bound, "quantize_cols_fp8: ld " << ld << " < rows " << rows_bound);
  TileJob j;
  j.X = static_cast<const bf16*>(X);
  j.offsets = offsets;
  j.G = G;
  j.K = K;
  j.cut = recipe == Fp8Recipe::kBlock ? Cut::kAlong : Cut::kTensor;
  j.rows = {q, scales};
  j.cols = {qt, scales_t, ld};
  if (j.cut == Cut::kTensor) tensor_scales_for(j, 0, stream);
  // Each group's row blocks, however the rows fall: at most rows_bound / 128 + G of them.
  launch_tiles(j, rows_bound / kB + G, stream);
}

void quantize_rows_fp8(const void* X, const int64_t* offsets, int64_t G, int64_t rows_bound,
                       int64_t K, Fp8Recipe recipe, uint8_t* q, float* scales,
                       cudaStream_t stream) {
  quantize_rows_and_cols_fp8(X, offsets, G, rows_bound, K, recipe, q, scales, nullptr, 0, nullptr,
                             stream);
}

void quantize_cols_fp8(const void* X, const int64_t* offsets, int64_t G, int64_t rows_bound,
                       int64_t K, Fp8Recipe recipe, uint8_t* qt, int64_t ld, float* scales_t,
                       cudaStream_t stream) {
  quantize_rows_and_cols_fp8(X, offsets, G, rows_bound, K, recipe, nullptr, nullptr, qt, ld,
                             scales_t, stream);
}

int64_t cols_fp8_scale_bound(int64_t G, int64_t rows_bound, int64_t K) {
  return K * (rows_bound / kB + G);
}

int64_t weight_fp8_scale_stride(int64_t P, int64_t Q) { return tiles_ld(P) * tiles_ld(Q); }

void quantize_weight_fp8(const void* W, int64_t G, int64_t P, int64_t Q, Fp8Recipe recipe,
                         uint8_t* q, float* scales, uint8_t* qt, float* scales_t,
                         cudaStream_t stream) {
  if (G == 0 || P == 0 || Q == 0 || (!q && !qt)) return;
  TileJob j;
  j.X = static_cast<const bf16*>(W);
  j.group_rows = P;
  j.G = G;
  j.K = Q;
  j.cut = recipe == Fp8Recipe::kBlock ? Cut::kTile : Cut::kTensor;
  const int64_t stride = weight_fp8_scale_stride(P, Q);
  j.rows = {q, scales, 0, 0, false, tiles_ld(Q), stride};
  j.cols = {qt, scales_t, P, P * Q, true, tiles_ld(P), stride};
  if (j.cut == Cut::kTensor) tensor_scales_for(j, P * Q, stream);
  launch_tiles(j, G * ((P + kB - 1) / kB), stream);
}

}  // namespace moe::cuda
