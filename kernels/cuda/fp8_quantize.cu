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
constexpr int kLoads = kB / kRowsPerPass;             // 16-byte chunks a thread loads per tile

__device__ inline float scale_of(float amax) { return amax > 0.0f ? amax / kE4m3Max : 1.0f; }
// A bf16 value from its bits (the low 16 of `bits`).
__device__ inline float bf16_bits_value(unsigned bits) { return __uint_as_float(bits << 16); }
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

// dispatch_dtype fp8's packed rows (core/fp8.h fp8_row_bytes): a row's scale of block kb, and a
// code's value, exact in fp32.
__device__ inline float packed_scale(const uint8_t* row, int64_t H, int64_t kb) {
  return reinterpret_cast<const float*>(row + fp8_row_scales_at(H))[kb];
}
__device__ inline float code_value(uint8_t code) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3)));
}

// The e4m3 codes of v0 / scale and v1 / scale (core/fp8.h's quotient, round to nearest even,
// saturating to +-448 as e4m3_round), v0's in the low byte. kExact: fp8_quotient; else its
// branch-free part, for values and scales known not to be tiny.
template <bool kExact>
__device__ inline float quotient(float v, const Scale& sc) {
  return kExact ? fp8_quotient(v, sc.s, sc.inv) : fp8_quotient_normal(v, sc.s, sc.inv);
}
template <bool kExact>
__device__ inline uint32_t codes_of(float v0, float v1, const Scale& sc) {
  return __nv_cvt_float2_to_fp8x2(make_float2(quotient<kExact>(v0, sc), quotient<kExact>(v1, sc)),
                                  __NV_SATFINITE, __NV_E4M3);
}
// Eight values' codes, the first in the lowest byte.
template <bool kExact>
__device__ inline uint2 codes_of(const float (&v)[kVec], const Scale& sc) {
  return make_uint2(codes_of<kExact>(v[0], v[1], sc) | codes_of<kExact>(v[2], v[3], sc) << 16,
                    codes_of<kExact>(v[4], v[5], sc) | codes_of<kExact>(v[6], v[7], sc) << 16);
}

// Per-tensor amax of each group's elements into amax_bits[kTensorScaleStride * g] (zeroed): group g
// spans elements [offsets[g] * K, offsets[g + 1] * K), or without offsets [g * group_elems, (g + 1)
// * group_elems); K and group_elems multiples of 8 (16-byte loads), four loads in flight a thread.
// Non-negative floats order as their bits do, so an integer max is exact.
__global__ void group_amax_kernel(const bf16* X, const int64_t* offsets, int64_t K,
                                  int64_t group_elems, unsigned* amax_bits) {
  constexpr int kInFlight = 4;
  const int64_t g = blockIdx.y;
  const int64_t begin = (offsets ? offsets[g] * K : g * group_elems) / kVec;
  const int64_t end = (offsets ? offsets[g + 1] * K : (g + 1) * group_elems) / kVec;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const uint4* chunks = reinterpret_cast<const uint4*>(X);
  float m = 0.0f;
  for (int64_t i = begin + blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < end;
       i += kInFlight * stride) {
    uint4 u[kInFlight];
#pragma unroll
    for (int l = 0; l < kInFlight; ++l)
      u[l] = i + l * stride < end ? chunks[i + l * stride] : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int l = 0; l < kInFlight; ++l)
#pragma unroll
      for (int k = 0; k < kVec; ++k) m = fmaxf(m, fabsf(value_of(u[l], k)));
  }
  m = block_max(m);
  if (threadIdx.x == 0 && m > 0.0f)
    atomicMax(&amax_bits[kTensorScaleStride * g], __float_as_uint(m));
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
  const bf16* X = nullptr;  // [rows, K]
  // Or X's rows as dispatch_dtype fp8 packed them (row_bytes each): each value bf16(scale *
  // code), as the step would have stored them.
  const uint8_t* packed = nullptr;
  int64_t packed_row_bytes = 0;
  const int64_t* offsets = nullptr;  // null: group g is rows [g * group_rows, (g + 1) * group_rows)
  int64_t group_rows = 0, G = 0, K = 0;
  Cut cut = Cut::kTensor;
  const float* tensor_scales = nullptr;  // kTensor: group g's at [kTensorScaleStride * g]
  bool amax_ready = false;  // kTensor: the first side's scales hold each group's amax bits
  Side rows, cols;          // codes as stored, and transposed
};

__device__ inline int64_t row_blocks_of(int64_t n) { return (n + kB - 1) / kB; }

// Where a tile lies: its group g, owning rows [g0, g0 + n); the tile's first row r0 and column c0,
// its valid rows and columns; its row block within the group (rb) and the row blocks of the
// groups before g (before).
struct TilePlace {
  int64_t g = 0, g0 = 0, n = 0, r0 = 0, c0 = 0, rb = 0, before = 0;
  int rows = 0, cols = 0;
};

// With offsets, the groups' table in shared memory: each group's first row and the row blocks of
// the groups before it (G + 1 entries each; the last ones are the totals), so that a tile finds
// its group by a binary search there, with no global load between one tile and the next.
struct GroupTable {
  int64_t* first_row;
  int* first_block;
};
size_t group_table_bytes(int64_t G) { return size_t(G + 1) * (sizeof(int64_t) + sizeof(int)); }

// Each thread takes a run of groups; a block-wide scan of the runs' row blocks places them.
__device__ void fill_group_table(const TileJob& j, const GroupTable& tab) {
  __shared__ int warp_sums[kTileThreads / 32];
  const int t = threadIdx.x;
  const int64_t per = (j.G + kTileThreads - 1) / kTileThreads;
  const int64_t first = min(j.G, t * per), last = min(j.G, first + per);
  int mine = 0;
  for (int64_t g = first; g < last; ++g)
    mine += int(row_blocks_of(j.offsets[g + 1] - j.offsets[g]));
  int run = warp_inclusive_sum(mine);
  if (t % 32 == 31) warp_sums[t / 32] = run;
  __syncthreads();
  run -= mine;
  for (int w = 0; w < t / 32; ++w) run += warp_sums[w];
  for (int64_t g = first; g < last; ++g) {
    tab.first_row[g] = j.offsets[g];
    tab.first_block[g] = run;
    run += int(row_blocks_of(j.offsets[g + 1] - j.offsets[g]));
  }
  if (t == kTileThreads - 1) {
    tab.first_row[j.G] = j.offsets[j.G];
    tab.first_block[j.G] = run;
  }
  __syncthreads();
}

// Tile `tile` of the job, counted row block by row block over the groups, column blocks inner.
__device__ inline TilePlace place_of(const TileJob& j, const GroupTable& tab, int64_t tile,
                                     int64_t col_blocks) {
  TilePlace p;
  const int64_t R = tile / col_blocks;
  p.c0 = tile % col_blocks * kB;
  if (j.offsets) {
    p.g = last_at_or_below(tab.first_block, j.G, R);
    p.before = tab.first_block[p.g];
    p.g0 = tab.first_row[p.g];
    p.n = tab.first_row[p.g + 1] - p.g0;
  } else {
    const int64_t per = row_blocks_of(j.group_rows);
    p.g = R / per;
    p.before = p.g * per;
    p.g0 = p.g * j.group_rows;
    p.n = j.group_rows;
  }
  p.rb = R - p.before;
  p.r0 = p.g0 + p.rb * kB;
  p.rows = int(min(int64_t(kB), p.g0 + p.n - p.r0));
  p.cols = int(min(int64_t(kB), j.K - p.c0));
  return p;
}

// Thread t's chunks of a tile: chunk t % 16 of rows t / 16 + 16 i (zeros outside the operand).
__device__ inline void load_tile(const TileJob& j, const TilePlace& p, uint4 (&u)[kLoads]) {
  const int t = threadIdx.x, c8 = t % kChunks;
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int r = t / kChunks + i * kRowsPerPass;
    u[i] = make_uint4(0, 0, 0, 0);
    if (r >= p.rows || c8 * kVec >= p.cols) continue;
    if (!j.packed) {
      u[i] = *reinterpret_cast<const uint4*>(j.X + (p.r0 + r) * j.K + p.c0 + c8 * kVec);
      continue;
    }
    const uint8_t* row = j.packed + (p.r0 + r) * j.packed_row_bytes;
    const uint2 codes = *reinterpret_cast<const uint2*>(row + p.c0 + c8 * kVec);
    const float s = packed_scale(row, j.K, p.c0 / kB);
    __align__(16) bf16 v[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      v[k] = __float2bfloat16_rn(
          __fmul_rn(s, code_value(uint8_t((k < 4 ? codes.x : codes.y) >> (8 * (k % 4))))));
    u[i] = *reinterpret_cast<const uint4*>(v);
  }
}

// The codes as stored, then transposed, of a tile in shared memory (scales known). kExact: each
// value's quotient checks for tiny values (a tile that holds one); else the branch-free one.
template <Cut kCut, bool kExact>
__device__ void store_tile_codes(const TileJob& j, const TilePlace& p, bool reuse,
                                 const uint4 (*tile)[kChunks], uint2 (*codes)[kChunks],
                                 const Scale* row_scale, const Scale* col_scale, const Scale& s) {
  constexpr bool along = kCut == Cut::kAlong;
  const int t = threadIdx.x, c8 = t % kChunks;
  if (j.rows.q) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int r = t / kChunks + i * kRowsPerPass;
      if (r >= p.rows || c8 * kVec >= p.cols) continue;
      const uint4 v8 = tile[r][c8 ^ (r / 8 % 8)];
      float v[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = value_of(v8, k);
      const uint2 q = codes_of<kExact>(v, along ? row_scale[r] : s);
      *reinterpret_cast<uint2*>(j.rows.q + (p.r0 + r) * j.K + p.c0 + c8 * kVec) = q;
      if (reuse) codes[r][c8 ^ (r / 8 % 16)] = q;
    }
  }
  if (reuse) __syncthreads();
  // Sub-block rows 8 r8.., columns 8 cc..: 16 consecutive threads write 128 bytes of a row of qt.
  const int r8 = t % kChunks, cc = t / kChunks;
  if (!j.cols.q || r8 * 8 >= p.rows || cc * kVec >= p.cols) return;
  const int valid = min(8, p.rows - r8 * 8);
  uint8_t* dst = j.cols.q + p.g * j.cols.group_stride + (p.c0 + cc * kVec) * j.cols.ld +
                 (j.cols.local_rows ? p.r0 - p.g0 : p.r0) + r8 * 8;
  if (reuse) {
    uint2 q[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = codes[r8 * 8 + i][cc ^ (r8 % 16)];
#pragma unroll
    for (int k = 0; k < kVec; ++k) store_codes(dst + k * j.cols.ld, column_of(q, k), valid);
  } else {
    uint4 v8[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v8[i] = tile[r8 * 8 + i][cc ^ (r8 % 8)];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      float v[kVec];
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = value_of(v8[i], k);
      store_codes(dst + k * j.cols.ld, codes_of<kExact>(v, along ? col_scale[cc * kVec + k] : s),
                  valid);
    }
  }
}

// Persistent blocks walk the 128 x 128 tiles of every group. A tile comes into shared memory once,
// in 16-byte chunks whose places are swizzled by row (chunk c of row r at c ^ (r / 8 % 8)), so that
// both a row's chunks and a column of 8 x 8 sub-blocks are read without bank conflicts; its
// scales, each computed by one thread; then its codes as stored (consecutive threads along a row)
// and transposed (each thread an 8 x 8 sub-block, consecutive threads down a column), 8 bytes a
// store. The next tile's loads are issued as soon as this one sits in shared memory, so that they
// are in flight while this one's codes are computed and stored.
template <Cut kCut>
__global__ void __launch_bounds__(kTileThreads, 2) quantize_tiles_kernel(const TileJob j) {
  constexpr bool along = kCut == Cut::kAlong;
  const bool reuse = !along && j.rows.q && j.cols.q;  // the transposed codes from the stored
  // The tile (bf16); where both orientations share one scale, its codes as stored (8-byte chunks,
  // chunk c of row r at c ^ (r / 8 % 16)), which the transposed half reads back; the group table.
  extern __shared__ uint4 smem[];
  uint4(*tile)[kChunks] = reinterpret_cast<uint4(*)[kChunks]>(smem);
  uint2(*codes)[kChunks] = reinterpret_cast<uint2(*)[kChunks]>(smem + kB * kChunks);
  char* table = reinterpret_cast<char*>(smem + kB * kChunks) + (reuse ? kB * kB : 0);
  const GroupTable tab{reinterpret_cast<int64_t*>(table),
                       reinterpret_cast<int*>(table + sizeof(int64_t) * (j.G + 1))};
  __shared__ Scale row_scale[kB], col_scale[kB];
  __shared__ float row_amax[kB], col_part[kTileThreads / 32][kB], warp_amax[kTileThreads / 32];
  const int t = threadIdx.x, warp = t / 32, c8 = t % kChunks;
  // A bf16 magnitude's bits - 1 below this: 0 < |v| < kFp8TinyValue.
  const unsigned tiny_bits = (__float_as_uint(kFp8TinyValue) >> 16) - 1u;

  if (j.offsets) fill_group_table(j, tab);
  const int64_t col_blocks = (j.K + kB - 1) / kB;
  const int64_t tiles =
      col_blocks * (j.offsets ? tab.first_block[j.G] : j.G * row_blocks_of(j.group_rows));
  uint4 u[kLoads];
  TilePlace next;
  // kTensor: the next tile's group scale, loaded with its values, so that its latency (an L2
  // round trip every tile, a tenth of the kernel's stalls on Mixtral-8x7B's dh) overlaps this one.
  float next_scale = 1.0f;
  if (blockIdx.x < tiles) {
    next = place_of(j, tab, blockIdx.x, col_blocks);
    load_tile(j, next, u);
    if (kCut == Cut::kTensor) next_scale = j.tensor_scales[kTensorScaleStride * next.g];
  }
  for (int64_t at = blockIdx.x; at < tiles; at += gridDim.x) {
    const TilePlace p = next;
    const float tensor_scale = next_scale;
    __syncthreads();  // the previous tile's readers of shared memory are done

    // Magnitudes as bf16 bits, two to a word (unsigned halfwords order as the values do), so
    // that a max or min takes two values in one instruction and nothing is converted yet.
    unsigned tile_m = 0, col_m[kVec / 2] = {}, least = ~0u;  // least: |v| bits - 1, 0 wraps
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int r = t / kChunks + i * kRowsPerPass;
      tile[r][c8 ^ (r / 8 % 8)] = u[i];
      const unsigned w[4] = {u[i].x, u[i].y, u[i].z, u[i].w};
      unsigned m2 = 0;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const unsigned a = w[k] & 0x7fff7fffu;
        m2 = __vmaxu2(m2, a);
        least = __vminu2(least, __vsub2(a, 0x00010001u));
        if (along) col_m[k] = __vmaxu2(col_m[k], a);
      }
      unsigned m = max(m2 & 0xffffu, m2 >> 16);
      if (along && j.rows.q) {
        for (int d = kChunks / 2; d > 0; d /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, d));
        if (c8 == 0) row_amax[r] = bf16_bits_value(m);
      }
      tile_m = max(tile_m, m);
    }
    if (at + gridDim.x < tiles) {
      next = place_of(j, tab, at + gridDim.x, col_blocks);
      load_tile(j, next, u);
      if (kCut == Cut::kTensor) next_scale = j.tensor_scales[kTensorScaleStride * next.g];
    }
    if (along && j.cols.q) {
      // Lanes l and l ^ 16 hold the same chunk's columns.
#pragma unroll
      for (int k = 0; k < kVec / 2; ++k) {
        col_m[k] = __vmaxu2(col_m[k], __shfl_xor_sync(0xffffffffu, col_m[k], 16));
        if (t % 32 < kChunks) {
          col_part[warp][c8 * kVec + 2 * k] = bf16_bits_value(col_m[k] & 0xffffu);
          col_part[warp][c8 * kVec + 2 * k + 1] = bf16_bits_value(col_m[k] >> 16);
        }
      }
    }
    if (kCut == Cut::kTile) {
      tile_m = __reduce_max_sync(0xffffffffu, tile_m);
      if (t % 32 == 0) warp_amax[warp] = bf16_bits_value(tile_m);
    }
    bool tiny = __syncthreads_or(min(least & 0xffffu, least >> 16) < tiny_bits);
    Scale s;  // the tile's scale where one serves the whole tile
    if (kCut == Cut::kTensor) {
      s.s = tensor_scale;
      s.inv = __frcp_rn(s.s);
      tiny = tiny || s.s < kFp8TinyScale;  // a tiny scale needs no tiny value in this tile
    } else if (kCut == Cut::kTile) {
      float m = 0.0f;
      for (int w = 0; w < kTileThreads / 32; ++w) m = fmaxf(m, warp_amax[w]);
      s = scale_from(m);
      const int64_t cb = p.c0 / kB;
      if (t == 0 && j.rows.scales)
        j.rows.scales[p.g * j.rows.tiles_stride + p.rb * j.rows.tiles_ld + cb] = s.s;
      if (t == 0 && j.cols.scales)
        j.cols.scales[p.g * j.cols.tiles_stride + cb * j.cols.tiles_ld + p.rb] = s.s;
    } else {
      // Columns' scales by the first 128 threads, rows' by the others (consecutive rows'
      // scales sit side by side).
      if (t < kB && j.cols.q) {
        float m = 0.0f;
        for (int w = 0; w < kTileThreads / 32; ++w) m = fmaxf(m, col_part[w][t]);
        col_scale[t] = scale_from(m);
        if (t < p.cols) j.cols.scales[j.K * (p.before + p.rb) + p.c0 + t] = col_scale[t].s;
      } else if (t >= kB && j.rows.q) {
        const int r = t - kB;
        row_scale[r] = scale_from(row_amax[r]);
        if (r < p.rows)
          j.rows.scales[col_blocks * p.g0 + p.c0 / kB * p.n + (p.r0 - p.g0 + r)] = row_scale[r].s;
      }
      __syncthreads();
    }
    // A tiny scale comes from a block of tiny values only: the flag covers every scale here.
    if (tiny)
      store_tile_codes<kCut, true>(j, p, reuse, tile, codes, row_scale, col_scale, s);
    else
      store_tile_codes<kCut, false>(j, p, reuse, tile, codes, row_scale, col_scale, s);
  }
}

// kTensor: each group's amax, as float bits, into amax_bits[kTensorScaleStride * g].
void group_amax(const bf16* X, const int64_t* offsets, int64_t G, int64_t K, int64_t group_elems,
                float* amax_bits, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(amax_bits, 0, size_t(kTensorScaleStride * G) * sizeof(float), stream));
  // About a thousand blocks however few the groups, at least 64 a group.
  const dim3 grid(unsigned(std::clamp<int64_t>(1024 / G, 64, 1024)), unsigned(G));
  group_amax_kernel<<<grid, kThreads, 0, stream>>>(X, offsets, K, group_elems,
                                                   reinterpret_cast<unsigned*>(amax_bits));
  CUDA_CHECK(cudaGetLastError());
}

// kTensor's scales for a job whose outputs want them: each group's amax (found here, or already
// in place with amax_ready) made its scale in the first side's scales, copied to the second's.
void tensor_scales_for(TileJob& j, int64_t group_elems, cudaStream_t stream) {
  float* first = j.rows.q ? j.rows.scales : j.cols.scales;
  if (!j.amax_ready) group_amax(j.X, j.offsets, j.G, j.K, group_elems, first, stream);
  amax_to_scale_kernel<<<blocks_for(j.G), kThreads, 0, stream>>>(first, j.G);
  CUDA_CHECK(cudaGetLastError());
  if (j.rows.q && j.cols.q && j.cols.scales != first)
    CUDA_CHECK(cudaMemcpyAsync(j.cols.scales, first, size_t(kTensorScaleStride * j.G) * 4,
                               cudaMemcpyDeviceToDevice, stream));
  j.tensor_scales = first;
}

// Each cut's kernel, with as many persistent blocks as fit on the GPU (and no more than tiles).
template <Cut kCut>
void launch_cut(const TileJob& j, int64_t tiles_bound, size_t smem, cudaStream_t stream) {
  static size_t opted_in = 0, fit_for = 0;  // this kernel's dynamic shared memory and fit so far
  static int fit = 0, sms = 0;
  if (smem > opted_in) {
    CUDA_CHECK(cudaFuncSetAttribute(quantize_tiles_kernel<kCut>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    opted_in = smem;
  }
  if (sms == 0) {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  }
  if (smem != fit_for) {
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, quantize_tiles_kernel<kCut>,
                                                             kTileThreads, smem));
    fit_for = smem;
  }
  const int64_t blocks = std::min<int64_t>(tiles_bound, int64_t(std::max(fit, 1)) * sms);
  quantize_tiles_kernel<kCut><<<unsigned(blocks), kTileThreads, smem, stream>>>(j);
  CUDA_CHECK(cudaGetLastError());
}

// Runs a job: per tensor, each group's scale first (group_elems: a group's elements where the
// job has no offsets); row_blocks bounds the 128-row blocks of all groups together (the grid).
void quantize_tiles(TileJob j, int64_t group_elems, int64_t row_blocks, cudaStream_t stream) {
  MOE_CHECK(j.K % kVec == 0, "FP8 quantization: rows of " << j.K << " values, not a multiple of "
                                                          << kVec << " (16-byte loads)");
  // The group table sits in shared memory: 12 bytes a group.
  MOE_CHECK(j.G <= kFp8CudaMaxGroups, "FP8 quantization: " << j.G << " groups, more than the "
                                                           << kFp8CudaMaxGroups
                                                           << " a block's group table holds");
  const int64_t tiles_bound = row_blocks * ((j.K + kB - 1) / kB);
  if (tiles_bound == 0) return;
  if (j.cut == Cut::kTensor) tensor_scales_for(j, group_elems, stream);
  // The tile, the codes' copy where both orientations share a scale, the group table.
  constexpr size_t kTileBytes = kB * kB * 2, kCodesBytes = kB * kB;
  const bool reuse = j.cut != Cut::kAlong && j.rows.q && j.cols.q;
  const size_t smem =
      kTileBytes + (reuse ? kCodesBytes : 0) + (j.offsets ? group_table_bytes(j.G) : 0);
  switch (j.cut) {
    case Cut::kTensor:
      return launch_cut<Cut::kTensor>(j, tiles_bound, smem, stream);
    case Cut::kAlong:
      return launch_cut<Cut::kAlong>(j, tiles_bound, smem, stream);
    case Cut::kTile:
      return launch_cut<Cut::kTile>(j, tiles_bound, smem, stream);
  }
}

// ---- dispatch_dtype fp8: packed rows (core/fp8.h fp8_row_bytes) ----

constexpr int kRowVec = 4;  // values a lane takes of a 1 x 128 block: a warp per block

// One warp per (row, 1 x 128 block) of x [n, H] bf16: the block's amax, scale and codes into its
// packed row, the scale after the codes; block 0's warp zeroes the row's padding. H % 16 == 0.
__global__ void pack_fp8_rows_kernel(const bf16* x, int64_t n, int64_t H, int64_t row_bytes,
                                     uint8_t* packed) {
  const int lane = threadIdx.x % 32;
  const int64_t nb = (H + kB - 1) / kB, scales_at = fp8_row_scales_at(H);
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t w = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32; w < n * nb;
       w += warps) {
    const int64_t r = w / nb, kb = w % nb, c = kb * kB + lane * kRowVec;
    uint8_t* row = packed + r * row_bytes;
    float v[kRowVec] = {};
    if (c < H) {
      const uint2 u = *reinterpret_cast<const uint2*>(x + r * H + c);
      for (int k = 0; k < 2; ++k) {
        const unsigned bits = k == 0 ? u.x : u.y;
        v[2 * k] = bf16_bits_value(bits & 0xffffu);
        v[2 * k + 1] = bf16_bits_value(bits >> 16);
      }
    }
    float m = 0.0f;
    for (float vi : v) m = fmaxf(m, fabsf(vi));
    const Scale sc = scale_from(warp_max(m));
    if (c < H)
      *reinterpret_cast<uint32_t*>(row + c) =
          codes_of<true>(v[0], v[1], sc) | codes_of<true>(v[2], v[3], sc) << 16;
    if (lane == 0) reinterpret_cast<float*>(row + scales_at)[kb] = sc.s;
    if (kb == 0 && lane < (row_bytes - scales_at - 4 * nb) / 4)
      reinterpret_cast<uint32_t*>(row + scales_at + 4 * nb)[lane] = 0;
  }
}

// Expert-major packed rows -> the rows operand quantize_rows_fp8 (kBlock) would have made of
// their values: codes q [., H] and each group's scales, block kb of its row r at
// scales[nb * offsets[g] + kb * n_g + r]. One block per row.
__global__ void fp8_rows_to_gemm_kernel(const uint8_t* packed, const int64_t* offsets, int64_t G,
                                        int64_t H, int64_t row_bytes, uint8_t* q, float* scales) {
  const int64_t nb = (H + kB - 1) / kB;
  for (int64_t r = blockIdx.x; r < offsets[G]; r += gridDim.x) {
    const uint8_t* row = packed + r * row_bytes;
    copy_row(q + r * H, row, H);
    const int64_t g = last_at_or_below(offsets, G + 1, r);
    const int64_t n_g = offsets[g + 1] - offsets[g];
    for (int64_t kb = threadIdx.x; kb < nb; kb += blockDim.x)
      scales[nb * offsets[g] + kb * n_g + (r - offsets[g])] = packed_scale(row, H, kb);
  }
}

}  // namespace

void quantize_rows_and_cols_fp8(const void* X, const int64_t* offsets, int64_t G,
                                int64_t rows_bound, int64_t K, Fp8Recipe recipe, uint8_t* q,
                                float* scales, uint8_t* qt, int64_t ld, float* scales_t,
                                cudaStream_t stream, bool amax_ready) {
  if (G == 0 || rows_bound == 0 || K == 0 || (!q && !qt)) return;
  MOE_CHECK(!amax_ready || recipe == Fp8Recipe::kTensor,
            "FP8 quantization: a given amax is per tensor (fp8_tensor), not per block");
  MOE_CHECK(!qt || ld >= rows_bound, "quantize_cols_fp8: ld " << ld << " < rows " << rows_bound);
  TileJob j;
  j.X = static_cast<const bf16*>(X);
  j.offsets = offsets;
  j.G = G;
  j.K = K;
  j.cut = recipe == Fp8Recipe::kBlock ? Cut::kAlong : Cut::kTensor;
  j.rows = {q, scales};
  j.cols = {qt, scales_t, ld};
  j.amax_ready = amax_ready;
  // Each group's row blocks, however the rows fall: at most rows_bound / 128 + G of them.
  quantize_tiles(j, 0, rows_bound / kB + G, stream);
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
  j.rows = {q, scales, 0, 0, false, weight_fp8_tiles_ld(Q), stride};
  j.cols = {qt, scales_t, P, P * Q, true, weight_fp8_tiles_ld(P), stride};
  quantize_tiles(j, P * Q, G * ((P + kB - 1) / kB), stream);
}

void pack_fp8_rows(const void* x, int64_t n, int64_t H, void* packed, cudaStream_t stream) {
  if (n == 0) return;
  MOE_CHECK(H % 16 == 0, "pack_fp8_rows: H " << H << " is not a multiple of 16");
  const int64_t warps = n * ((H + kB - 1) / kB);
  pack_fp8_rows_kernel<<<blocks_for(warps * 32), kThreads, 0, stream>>>(
      static_cast<const bf16*>(x), n, H, fp8_row_bytes(H), static_cast<uint8_t*>(packed));
  CUDA_CHECK(cudaGetLastError());
}

void quantize_packed_cols_fp8(const void* packed, const int64_t* offsets, int64_t G,
                              int64_t rows_bound, int64_t K, uint8_t* qt, int64_t ld,
                              float* scales_t, cudaStream_t stream) {
  if (G == 0 || rows_bound == 0 || K == 0) return;
  MOE_CHECK(K % 16 == 0, "quantize_packed_cols_fp8: K " << K << " is not a multiple of 16");
  MOE_CHECK(ld >= rows_bound, "quantize_packed_cols_fp8: ld " << ld << " < rows " << rows_bound);
  TileJob j;
  j.packed = static_cast<const uint8_t*>(packed);
  j.packed_row_bytes = fp8_row_bytes(K);
  j.offsets = offsets;
  j.G = G;
  j.K = K;
  j.cut = Cut::kAlong;
  j.cols = {qt, scales_t, ld};
  quantize_tiles(j, 0, rows_bound / kB + G, stream);
}

void fp8_rows_to_gemm(const void* packed, const int64_t* offsets, int64_t G, int64_t rows_bound,
                      int64_t H, uint8_t* q, float* scales, cudaStream_t stream) {
  if (G == 0 || rows_bound == 0) return;
  MOE_CHECK(H % 16 == 0, "fp8_rows_to_gemm: H " << H << " is not a multiple of 16");
  fp8_rows_to_gemm_kernel<<<row_grid(rows_bound), 128, 0, stream>>>(
      static_cast<const uint8_t*>(packed), offsets, G, H, fp8_row_bytes(H), q, scales);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace moe::cuda
