#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <sstream>
#include <type_traits>

#include "core/error.h"
#include "core/fp8.h"
#include "kernels/cuda/grouped_gemm.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/sm90.cuh"
#include "kernels/cuda/swiglu.cuh"

namespace moe::cuda {
namespace {

using namespace sm90;

constexpr int kBM = kGroupedTileRows;     // rows of C per tile: one 64-row half per MMA warpgroup
constexpr int kThreads = 384;             // warpgroup 0 loads, warpgroups 1 and 2 multiply
constexpr int kProducerRegs = 40;         // the loader needs few registers ...
constexpr int kConsumerRegs = 232;        // ... the MMA warpgroups' accumulators many
constexpr uint32_t kBothConsumers = 256;  // threads of the two MMA warpgroups
constexpr uint32_t kTailBarrier = 1;      // named barrier id for the zeroed K tail
// Named barriers 2 and 3 are each MMA warpgroup's own; with ping-pong, warpgroup c waits on
// kTurnBarrier + c for its turn to issue MMAs.
constexpr uint32_t kTurnBarrier = 4;
// FP8: K stages per straight-line chunk of the mainloop, whose MMAs drain at the chunk's end.
// Against a drain every stage, chunks of 4 made Mixtral-8x7B's FP8 GEMMs 3-12% faster; chunks
// of 8 measured level with 4 (results/2026-11-25-fp8-mainloop-chunks).
constexpr int kFp8Chunk = 4;
constexpr int kFp8BlockEdge = int(kFp8Block);  // fp8_block's block edge (core/fp8.h), 128

// K per stage. Where K is the operands' inner dimension, one 128-byte swizzled row of bf16. The
// weight gradients' K runs down the rows of both operands (MN-major), and there a stage takes 32
// rows: stages half the size and twice as many in the same shared memory. A stage stays taken
// from its load until the MMAs of the stage after it are issued, so bytes in flight are
// (stages - 2) stages; with 64-row stages the weight gradients fitted only 3 stages beside their
// staging boxes and waited for their loads (ncu: tensor pipes under 50% busy on DeepSeek-V3's).
// An FP8 (e4m3) stage holds 128 K: the same 128-byte rows, swizzle and descriptor steps. FP8
// weight gradients read both operands transposed (K-major, K along each 128-byte row), as the
// other layouts do.
template <GroupedLayout L, class InT>
constexpr int k_per_stage() {
  return L == GroupedLayout::kRowsTTimesRows && sizeof(InT) == 2 ? 32 : 128 / int(sizeof(InT));
}
using e4m3 = __nv_fp8_e4m3;
template <class InT>
constexpr bool kIsFp8 = sizeof(InT) == 1;

// sm_90's most shared memory per block, less the kernel's static prefix array and the slack for
// aligning the stages to the 128-byte swizzle's 1024-byte atom.
constexpr int kSmemBudget = 227 * 1024 - 4 * int(GroupedGemm::kMaxGroups + 1) - 1024;

// kBlock: FP8 with fp8_block's scales (GroupedFp8Scales::block). The weight gradients' stages
// then also hold the tile's 128 column scales of each operand for the stage's 128-row block
// (kScaleBytes), and the kernel the count of 128-row blocks before each group (kBlocksBytes),
// where a group's column scales start.
template <GroupedLayout L, int BN, class InT, class OutT, bool kBlock = false>
struct TileConfig {
  static constexpr bool kRowsK = L == GroupedLayout::kRowsTTimesRows;
  static constexpr int kBK = k_per_stage<L, InT>();
  static constexpr int kIn = int(sizeof(InT));
  // A TMA box of 64 columns by kBK rows (MN-major operands), or a 64-row half of a K-major A.
  static constexpr int kLoadBox = 64 * kBK * kIn;
  static constexpr int kABytes = kBM * kBK * kIn;
  static constexpr int kBBytes = BN * kBK * kIn;
  static constexpr bool kColScales = kBlock && kRowsK;
  // fp8_block's row GEMMs on 256 columns: the stage also holds its block's 1 x 128 scales of the
  // tile's rows (where they can be bulk-copied: see the producer).
  static constexpr bool kRowScales = kBlock && !kRowsK && BN == 256;
  // (Padded to the stages' 1024-byte alignment.)
  static constexpr int kScaleBytes =
      kColScales ? (4 * (kBM + BN) + 1023) / 1024 * 1024 : (kRowScales ? 1024 : 0);
  static constexpr int kStageBytes = kABytes + kBBytes + kScaleBytes;
  static constexpr int kBlocksBytes = kColScales ? 4 * int(GroupedGemm::kMaxGroups + 1) : 0;
  // The weight gradients store C by TMA from staging boxes of each MMA warpgroup, filled and
  // stored in rounds, so that a tile's last stores drain while the next tile's MMAs run. bf16
  // into bf16: two boxes (the tile in two rounds), which leaves 7 stages where four boxes (one
  // round) left 6: 1-10% faster on DeepSeek-V3's and Qwen3-30B-A3B's shapes, one box (8 stages)
  // slower on DeepSeek-V3's EP 2 shapes. Four boxes for FP8 (two would cost it a round and
  // leave it 3 stages: 0-4% slower; one box, 4 stages, 5-15% slower) and for fp32 gradients
  // (two: Qwen3-30B-A3B's 3% slower) (results/2026-11-27-session25).
  static constexpr int kEpilogueBoxes = kRowsK ? (kIsFp8<InT> || sizeof(OutT) == 4 ? 4 : 2) : 1;
  static constexpr int kBoxBytes = 64 * 128;  // a 64-row x 128-byte staging box of C
  static constexpr int kEpilogueBytes = 2 * kEpilogueBoxes * kBoxBytes;
  // As many stages as fit (8 at most), with a full and an empty mbarrier each.
  static constexpr int kFit = (kSmemBudget - kEpilogueBytes - kBlocksBytes) / (kStageBytes + 16);
  static constexpr int kStages = kFit < 8 ? kFit : 8;
  static constexpr int kSmemBytes =
      kStages * kStageBytes + kEpilogueBytes + 1024 + 2 * kStages * 8 + kBlocksBytes;
  static_assert(kStages >= 3, "too few stages fit in shared memory");
  static_assert(kStageBytes % 1024 == 0, "stages keep the 128-byte swizzle's 1024-byte atoms");
};

struct Params {
  const int64_t* offsets;  // [G + 1]
  int G;
  int M, N, K;    // the fixed dimensions (see core/grouped_gemm.h)
  int tile_cols;  // the columns the tiles span: N, or F = N / 2 with the SwiGLU epilogue
  void* C;        // kSwiGLUBackward: dh [rows, 2N]
  void* aux;      // kSwiGLU: a [rows, N / 2] (written); kSwiGLUBackward: h [rows, 2N] (read)
  // FP8: group g's operands' scales, at a_scales[scale_stride * g] and b_scales[...]; fp8_block's
  // row GEMMs: the weight scales' tile row (GroupedFp8Scales::tiles_ld).
  const float* a_scales;
  const float* b_scales;
  int scale_stride;
  int tiles_ld;
};

constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// One tile of the schedule: group g, the tile's first row (m0) and column (n0) of the group's C,
// the group's first row r0 and row count, and the number of K stages.
struct Tile {
  int g, m0, n0, k_tiles;
  int64_t r0;
  int rows;
};

// The M tiles of group g (C's rows: the group's rows, or M for the weight gradients).
template <GroupedLayout L>
__device__ __forceinline__ int m_tiles_of(const Params& p, int rows) {
  return ceil_div(L == GroupedLayout::kRowsTTimesRows ? p.M : rows, kBM);
}

// The schedule's units of group g: one tile per CTA of a cluster, the cluster's CTAs taking
// neighbouring M tiles of one column block (they share B's stages; an odd last M tile leaves the
// second CTA a tile past the group's rows, which it computes and does not store).
template <GroupedLayout L, int BN, int kCluster>
__device__ __forceinline__ int units_in_group(const Params& p, int g) {
  const int m_tiles = m_tiles_of<L>(p, int(p.offsets[g + 1] - p.offsets[g]));
  return ceil_div(m_tiles, kCluster) * ceil_div(p.tile_cols, BN);
}

// The largest g in [from, G) with prefix[g] <= t, given prefix[from] <= t: strides of 1, 2, 4, ...
// forward from `from`, then bisection of the last stride. A CTA's units ascend and its next one
// is mostly in the same group or a near one (DeepSeek-V3's weight gradients: 896 units a group,
// 132 apart): one or two shared-memory loads, where bisecting all G groups took 8 dependent ones
// at every tile (ncu: 15% of the warps' stall samples on 4-stage tiles, the tensor cores idle).
__device__ __forceinline__ int group_from(const int* prefix, int G, int t, int from) {
  int lo = from, stride = 1;
  while (lo + stride < G && prefix[lo + stride] <= t) {
    lo += stride;
    stride *= 2;
  }
  int hi = min(G - 1, lo + stride - 1);
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (prefix[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// prefix [G + 1]: the schedule's first unit of each group (shared memory). The largest g with
// prefix[g] <= t owns unit t (groups without units share their successor's prefix), searched
// from group `from` on (at most the owner); `rank` is the CTA's place in its cluster.
template <GroupedLayout L, int BN, int kCluster, int kBK>
__device__ __forceinline__ Tile decode_tile(const Params& p, const int* prefix, int t, int rank,
                                            int from = 0) {
  const int lo = group_from(prefix, p.G, t, from);
  Tile tile;
  tile.g = lo;
  tile.r0 = p.offsets[lo];
  tile.rows = int(p.offsets[lo + 1] - tile.r0);
  const int local = t - prefix[lo];
  // M tiles fastest: neighbouring clusters share a column block of B (the weights, in the
  // forward) in L2 as well.
  const int m_units = ceil_div(m_tiles_of<L>(p, tile.rows), kCluster);
  tile.m0 = ((local % m_units) * kCluster + rank) * kBM;
  tile.n0 = (local / m_units) * BN;
  tile.k_tiles = ceil_div(L == GroupedLayout::kRowsTTimesRows ? tile.rows : p.K, kBK);
  return tile;
}

// decode_tile for a unit after `last`'s (searched from its group) that may be past the
// schedule's end (then `last`, unchanged).
template <GroupedLayout L, int BN, int kCluster, int kBK>
__device__ __forceinline__ Tile decode_next(const Params& p, const int* prefix, int t, int total,
                                            int rank, const Tile& last) {
  return t < total ? decode_tile<L, BN, kCluster, kBK>(p, prefix, t, rank, last.g) : last;
}

// fp8_block's row GEMMs: the 1 x 128 scales of K block kt of the tile's group, its rows' in
// order (quantize_rows_fp8's layout: the group's blocks after those of the rows before it).
__device__ __forceinline__ const float* row_scales_of(const Params& p, const Tile& tile, int kt) {
  return p.a_scales + int64_t(ceil_div(p.K, kFp8BlockEdge)) * tile.r0 + int64_t(kt) * tile.rows;
}
// Whether each K block's scales of a tile's rows start 16-byte aligned and span a multiple of 16
// bytes, as a bulk copy needs: the group's first ones aligned and its rows a multiple of 4 (align
// 16 gives both; the tile's first row is a multiple of 128).
__device__ __forceinline__ bool rows_scales_copyable(const Params& p, const Tile& tile) {
  return reinterpret_cast<uintptr_t>(row_scales_of(p, tile, 0)) % 16 == 0 && tile.rows % 4 == 0;
}

// In place: counts [G] -> inclusive prefix sums, by one warp.
__device__ void warp_inclusive_scan(int* v, int n, int lane) {
  const int per = (n + 31) / 32, begin = min(n, lane * per), end = min(n, begin + per);
  int sum = 0;
  for (int i = begin; i < end; ++i) sum += v[i];
  int run = warp_inclusive_sum(sum) - sum;
  for (int i = begin; i < end; ++i) {
    run += v[i];
    v[i] = run;
  }
}

// One wgmma step of 32 bytes of K (16 bf16 or 32 e4m3) across the tile's BN columns.
template <int kTransA, int kTransB, int BN, class InT>
__device__ __forceinline__ void wgmma_tile_step(float (&acc)[BN / 2], uint64_t da, uint64_t db,
                                                int scale_d) {
  if constexpr (kIsFp8<InT>) {
    static_assert(BN == 128 && kTransA == 0 && kTransB == 0, "FP8: 128 columns, K-major");
    wgmma_m64n128k32_e4m3(acc, da, db, scale_d);
  } else if constexpr (BN == 256)
    wgmma_m64n256k16<kTransA, kTransB>(acc, da, db, scale_d);
  else
    wgmma_m64n128k16<kTransA, kTransB>(acc, da, db, scale_d);
}

// Bytes [valid, 128) of one 128-byte row of a swizzled box (TMA's layout), the row's index mod 8
// being `phase`: whole 16-byte chunks, and the chunk that holds byte `valid` byte by byte.
__device__ __forceinline__ void zero_row_tail(uint8_t* row, int phase, int valid) {
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    uint8_t* chunk = row + ((q ^ phase) << 4);
    if (16 * q >= valid)
      *reinterpret_cast<uint4*>(chunk) = make_uint4(0, 0, 0, 0);
    else if (16 * q + 16 > valid)
      for (int b = valid - 16 * q; b < 16; ++b) chunk[b] = 0;
  }
}

// FP8: a stage's partial sum, its MMAs done, into the fp32 total.
template <int kN>
__device__ __forceinline__ void add_partial(float (&total)[kN], float (&part)[kN]) {
  fence_accumulators(part);
#pragma unroll
  for (int i = 0; i < kN; ++i) total[i] += part[i];
}
// fp8_block's row GEMMs: the partial sum times its block's scales, s0 for the fragment's rows
// lane / 4 and s1 for lane / 4 + 8 (element i's row is (i / 2) % 2 of the two).
template <int kN>
__device__ __forceinline__ void add_partial_rows(float (&total)[kN], float (&part)[kN], float s0,
                                                 float s1) {
  fence_accumulators(part);
#pragma unroll
  for (int i = 0; i < kN; ++i) total[i] = fmaf(part[i], i & 2 ? s1 : s0, total[i]);
}
// fp8_block's weight gradients: also times column n's scale, cols[n] for the tile's columns
// (shared memory), element i's column being 8 (i / 4) + 2 (lane % 4) + i % 2.
template <int kN>
__device__ __forceinline__ void add_partial_rows_cols(float (&total)[kN], float (&part)[kN],
                                                      float s0, float s1, const float* cols,
                                                      int lane) {
  fence_accumulators(part);
  // Two 8-column blocks at a time: the compiler would otherwise load all 32 scales first, which
  // with the other stage's partial sum in flight is more registers than the warpgroup has (it
  // still spills 64-80 bytes; groups of 1 or 4 spill the same).
  constexpr int kGroup = 2;
#pragma unroll
  for (int j0 = 0; j0 < kN / 4; j0 += kGroup) {
#pragma unroll
    for (int j = j0; j < j0 + kGroup; ++j) {
      const float2 c = *reinterpret_cast<const float2*>(cols + 8 * j + 2 * (lane % 4));
      total[4 * j] = fmaf(part[4 * j], s0 * c.x, total[4 * j]);
      total[4 * j + 1] = fmaf(part[4 * j + 1], s0 * c.y, total[4 * j + 1]);
      total[4 * j + 2] = fmaf(part[4 * j + 2], s1 * c.x, total[4 * j + 2]);
      total[4 * j + 3] = fmaf(part[4 * j + 3], s1 * c.y, total[4 * j + 3]);
    }
#pragma unroll
    for (int i = 4 * j0; i < 4 * (j0 + kGroup); ++i) asm volatile("" : "+f"(total[i])::"memory");
  }
}

// The byte offset of (row, byte) in a 128-byte-swizzled box of 128-byte rows (TMA's layout).
__device__ __forceinline__ int swizzled(int row, int byte) {
  return row * 128 + ((((byte >> 4) ^ row) & 7) << 4) + (byte & 15);
}

__device__ __forceinline__ uint32_t bf16x2_bits(float x, float y) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// One 64 x 64 bf16 box of a warpgroup's fragment into a swizzled staging box: `pair(j, h)` gives
// the float2 its thread holds at 8-column block j, row lane / 4 + 8 h of its warp's 16, for
// blocks j0 .. j0 + 7. Two blocks a stmatrix (matrix m: block j + m / 2, rows 8 (m % 2) on), a
// quarter of the instructions of one 4-byte store a pair, each with its swizzled address; the
// 16-byte rows keep the 128-byte swizzle's 16-byte chunks whole.
template <class Pair>
__device__ __forceinline__ void stage_bf16_box(int j0, uint8_t* stage, int warp, int lane,
                                               Pair pair) {
  const int m = lane / 8;
  const int r = warp * 16 + 8 * (m % 2) + lane % 8;
  const uint32_t row_at = smem_addr(stage) + r * 128;
#pragma unroll
  for (int jj = 0; jj < 8; jj += 2) {
    const float2 a = pair(j0 + jj, 0), b = pair(j0 + jj, 1);
    const float2 c = pair(j0 + jj + 1, 0), d = pair(j0 + jj + 1, 1);
    stmatrix_x4(row_at + ((((jj + m / 2) ^ r) & 7) << 4), bf16x2_bits(a.x, a.y),
                bf16x2_bits(b.x, b.y), bf16x2_bits(c.x, c.y), bf16x2_bits(d.x, d.y));
  }
}

// The thread's float2 of an accumulator fragment at 8-column block j, row half h.
template <int N>
__device__ __forceinline__ float2 frag_pair(const float (&frag)[N], int j, int h) {
  return make_float2(frag[4 * j + 2 * h], frag[4 * j + 2 * h + 1]);
}

// The q-th 128-byte-wide column box of a warpgroup's 64-row fragment into a swizzled staging box.
template <int BN, class OutT>
__device__ __forceinline__ void stage_fragment_box(const float (&frag)[BN / 2], int q,
                                                   uint8_t* stage, OutT, int warp, int lane) {
  if constexpr (sizeof(OutT) == 2) {
    stage_bf16_box(q * 8, stage, warp, lane, [&](int j, int h) { return frag_pair(frag, j, h); });
  } else {
    static_assert(sizeof(OutT) == 4, "a staged fragment is bf16 or fp32");
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      const int j = q * 4 + jj;  // the fragment's 8-column block
      const int byte = (jj * 8 + (lane % 4) * 2) * 4;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp * 16 + lane / 4 + 8 * h;
        *reinterpret_cast<float2*>(stage + swizzled(r, byte)) = frag_pair(frag, j, h);
      }
    }
  }
}

// Rows [row0, row0 + 64) of a tile's 64 x 128-column box of C from `stage` (swizzled), stopping
// at the group's last row: C points at the group's first row, `ld` its row stride.
__device__ __forceinline__ void store_box_rows(__nv_bfloat16* C, int64_t ld, int col0, int row0,
                                               int rows, const uint8_t* stage, int t128) {
  const int chunk = t128 % 8;
#pragma unroll
  for (int pass = 0; pass < 4; ++pass) {
    const int r = pass * 16 + t128 / 8;
    if (row0 + r < rows)
      *reinterpret_cast<uint4*>(C + int64_t(row0 + r) * ld + col0 + chunk * 8) =
          *reinterpret_cast<const uint4*>(stage + swizzled(r, chunk * 16));
  }
}

// The fused up projection's epilogue (kSwiGLU): six boxes of 64 columns per warpgroup, h's gate
// and up halves, then a. The fragment's 8-column block j is gate column n0 + 8j for j < 16 and
// its up partner for j + 16.
__device__ __forceinline__ void swiglu_epilogue(const Params& p, const Tile& tile, int row0,
                                                float (&acc)[128], uint8_t* stage,
                                                uint32_t wg_barrier, int t128, int warp, int lane) {
  const int F = p.tile_cols;
  auto* h = static_cast<__nv_bfloat16*>(p.C) + tile.r0 * int64_t(p.N);
  auto* a = static_cast<__nv_bfloat16*>(p.aux) + tile.r0 * int64_t(F);
  if (row0 >= tile.rows) return;  // the same for the whole warpgroup
#pragma unroll
  for (int q = 0; q < 6; ++q) {
    named_barrier_sync(wg_barrier, 128);  // every thread has read the box's last contents
    if (q < 4) {
      stage_bf16_box(q * 8, stage, warp, lane, [&](int j, int h) { return frag_pair(acc, j, h); });
    } else {  // a, from h as stored: bf16 gate and up
      stage_bf16_box((q - 4) * 8, stage, warp, lane, [&](int j, int h) {
        const float2 g = frag_pair(acc, j, h), u = frag_pair(acc, j + 16, h);
        auto bf = [](float v) { return __bfloat162float(__float2bfloat16_rn(v)); };
        return make_float2(swiglu_value(bf(g.x), bf(u.x)), swiglu_value(bf(g.y), bf(u.y)));
      });
    }
    named_barrier_sync(wg_barrier, 128);
    const int half = 64 * (q % 2);
    if (q < 2)
      store_box_rows(h, p.N, tile.n0 + half, row0, tile.rows, stage, t128);
    else if (q < 4)
      store_box_rows(h, p.N, F + tile.n0 + half, row0, tile.rows, stage, t128);
    else
      store_box_rows(a, F, tile.n0 + half, row0, tile.rows, stage, t128);
  }
}

// The data gradient of the down projection with SwiGLU's backward (kSwiGLUBackward): each 64-column
// box of da goes to shared memory rounded to bf16, as the separate kernel would read it from
// global memory; then each thread takes 8 columns of a row, with h's gate and up columns from
// global memory, and writes dh's gate and up gradients. da itself is never stored.
template <int BN>
__device__ __forceinline__ void swiglu_bwd_epilogue(const Params& p, const Tile& tile, int row0,
                                                    float (&acc)[BN / 2], uint8_t* stage,
                                                    uint32_t wg_barrier, int t128, int warp,
                                                    int lane) {
  const int F = p.N;
  const int64_t ld = 2 * int64_t(F);
  const auto* h = static_cast<const __nv_bfloat16*>(p.aux) + tile.r0 * ld;
  auto* dh = static_cast<__nv_bfloat16*>(p.C) + tile.r0 * ld;
  if (row0 >= tile.rows) return;  // the same for the whole warpgroup
#pragma unroll
  for (int q = 0; q < BN / 64; ++q) {
    const int col0 = tile.n0 + 64 * q;
    if (col0 >= F) break;
    named_barrier_sync(wg_barrier, 128);  // every thread has read the box's last contents
    stage_fragment_box<BN>(acc, q, stage, __nv_bfloat16{}, warp, lane);
    named_barrier_sync(wg_barrier, 128);
    const int chunk = t128 % 8, col = col0 + chunk * 8;
#pragma unroll
    for (int pass = 0; pass < 4; ++pass) {
      const int r = pass * 16 + t128 / 8;
      if (row0 + r >= tile.rows || col >= F) continue;
      const int64_t at = int64_t(row0 + r) * ld + col;
      const uint4 d8 = *reinterpret_cast<const uint4*>(stage + swizzled(r, chunk * 16));
      const uint4 g8 = *reinterpret_cast<const uint4*>(h + at);
      const uint4 u8 = *reinterpret_cast<const uint4*>(h + at + F);
      uint4 dg8, du8;
      const auto* d2 = reinterpret_cast<const __nv_bfloat162*>(&d8);
      const auto* g2 = reinterpret_cast<const __nv_bfloat162*>(&g8);
      const auto* u2 = reinterpret_cast<const __nv_bfloat162*>(&u8);
      auto* dg2 = reinterpret_cast<__nv_bfloat162*>(&dg8);
      auto* du2 = reinterpret_cast<__nv_bfloat162*>(&du8);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 d = __bfloat1622float2(d2[e]), g = __bfloat1622float2(g2[e]),
                     u = __bfloat1622float2(u2[e]);
        float dg0, du0, dg1, du1;
        swiglu_grads(d.x, g.x, u.x, dg0, du0);
        swiglu_grads(d.y, g.y, u.y, dg1, du1);
        dg2[e] = __floats2bfloat162_rn(dg0, dg1);
        du2[e] = __floats2bfloat162_rn(du0, du1);
      }
      *reinterpret_cast<uint4*>(dh + at) = dg8;
      *reinterpret_cast<uint4*>(dh + at + F) = du8;
    }
  }
}

// kSwiGLU (up projection only, BN 256, bf16): a tile's 256 columns are 128 gate columns
// [n0, n0 + 128) and the 128 up columns [F + n0, ...) that pair with them, so that the epilogue
// writes both to h and a = silu(gate) * up, from the bf16-rounded h as the unfused kernel reads it.
//
// kCluster 2: pairs of CTAs on neighbouring M tiles, each loading half of every B stage and
// multicasting it to both, which halves B's traffic from L2 (the weights, in the forward and the
// data gradients). A stage is then free only when the consumers of both CTAs have released it.
//
// kPingpong (BN 128, single CTAs): each MMA warpgroup takes every other tile of the CTA whole,
// both 64-row halves, and the two take turns issuing MMAs, so that one's epilogue runs while the
// other's MMAs keep the tensor cores busy. The producer and the stages are the same; each stage
// has one consumer.
//
// InT e4m3 (FP8 codes, K-major layouts, cooperative): a stage's MMAs start a partial
// sum afresh, which is added into the fp32 total once they are done (the tensor cores' FP8 sums
// keep fewer bits than fp32; cuBLASLt without fast accumulation also promotes periodically).
// fp8_tensor's epilogue multiplies the total by the group's two scales first. fp8_block's (kBlock)
// 128-K stage is one block of K, so its partial sum is multiplied by that block's scales as it is
// added: the rows' 1 x 128 scales and the weight tile's 128 x 128 one in the row GEMMs (loaded
// by each thread for its two rows at the start of a chunk of stages), the rows' and columns'
// 128 x 1 scales in the weight gradients (loaded with the stage into shared memory by the
// producer). On 256 columns (kFp8Wide) a stage's two 128-column halves take turns in one partial
// sum: against 128-column tiles, each stage's operands feed twice the MMAs (the weight
// gradients 13-22% faster on DeepSeek-V3's and Qwen3-30B-A3B's shapes, fp8_tensor's row GEMMs
// 4-9%, fp8_block's about 3%); there fp8_block's row GEMMs take their rows' scales from the
// stage too (kRowScales).
template <GroupedLayout L, int BN, class OutT, GroupedEpilogue kEpi = GroupedEpilogue::kStore,
          int kCluster = 1, bool kPingpong = false, class InT = __nv_bfloat16, bool kBlock = false>
__global__ void __launch_bounds__(kThreads, 1)
    grouped_gemm_kernel(const __grid_constant__ CUtensorMap map_a,
                        const __grid_constant__ CUtensorMap map_b,
                        const __grid_constant__ CUtensorMap map_c, Params p) {
  using Cfg = TileConfig<L, BN, InT, OutT, kBlock>;
  constexpr bool kFp8 = kIsFp8<InT>;
  constexpr bool kSwiGLU = kEpi == GroupedEpilogue::kSwiGLU;
  constexpr bool kRowsK = L == GroupedLayout::kRowsTTimesRows;
  constexpr bool kBKMajor = L == GroupedLayout::kRowsTimesWeightT;
  // A is M-major only in the bf16 weight gradients; B is N-major but in the data gradients and
  // FP8 (whose operands are all K-major).
  constexpr int kTransA = kRowsK && !kFp8 ? 1 : 0;
  constexpr int kTransB = kBKMajor || kFp8 ? 0 : 1;
  // 64-row halves of a tile per MMA warpgroup: both with ping-pong (2 x 64 accumulators).
  constexpr int kHalves = kPingpong ? 2 : 1;
  static_assert(!kPingpong || (BN == 128 && kCluster == 1 && !kSwiGLU),
                "ping-pong: 128-column tiles, single CTAs, no SwiGLU forward epilogue");
  static_assert(kEpi != GroupedEpilogue::kAdd || (kRowsK && sizeof(OutT) == 4),
                "adds only into fp32 weight gradients");
  static_assert(!kFp8 || ((kBKMajor || kRowsK) && !kPingpong && !kSwiGLU),
                "FP8: K-major layouts, cooperative");
  // FP8 on 256 columns: each stage's MMAs run one 128-column half at a time into one partial
  // sum of 64 registers, added before the next half (a partial of the whole width and the
  // fp32 total would take 256 registers, more than a warpgroup has).
  constexpr bool kFp8Wide = kFp8 && BN == 256;
  static_assert(!kBlock || (kFp8 && Cfg::kBK == kFp8BlockEdge),
                "block scales are FP8's, one block of K per stage");

  extern __shared__ uint8_t smem_raw[];
  __shared__ int prefix[GroupedGemm::kMaxGroups + 1];
  uint8_t* smem =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* epilogue = smem + Cfg::kStages * Cfg::kStageBytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(epilogue + Cfg::kEpilogueBytes);
  uint64_t* empty = full + Cfg::kStages;
  // fp8_block's weight gradients: [G + 1] 128-row blocks before each group (its column scales
  // start at that many blocks of the operand's columns).
  int* blocks_before = reinterpret_cast<int*>(empty + Cfg::kStages);
  const int tid = threadIdx.x;

  if (tid == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbar_init(&full[s], 1);  // the producer's expect_tx arrival (+ the TMA bytes)
      // One arrival per consuming MMA warpgroup of the cluster.
      mbar_init(&empty[s], kPingpong ? 1 : 2 * kCluster);
    }
    mbar_fence_init();
    prefix[0] = 0;
  }
  constexpr int kTileN = kSwiGLU ? BN / 2 : BN;  // the tile's width in the schedule's columns
  for (int g = tid; g < p.G; g += kThreads)
    prefix[g + 1] = units_in_group<L, kTileN, kCluster>(p, g);
  if constexpr (Cfg::kColScales) {
    if (tid == 0) blocks_before[0] = 0;
    for (int g = tid; g < p.G; g += kThreads)
      blocks_before[g + 1] = ceil_div(int(p.offsets[g + 1] - p.offsets[g]), Cfg::kBK);
  }
  __syncthreads();
  if (tid < 32) warp_inclusive_scan(prefix + 1, p.G, tid);
  if (Cfg::kColScales && tid >= 32 && tid < 64)
    warp_inclusive_scan(blocks_before + 1, p.G, tid - 32);
  __syncthreads();
  if constexpr (kCluster > 1) cluster_sync();  // the peer's barriers exist before either uses them
  const int total = prefix[p.G];
  const int rank = kCluster > 1 ? int(cluster_cta_rank()) : 0;
  const int first_unit = int(blockIdx.x) / kCluster, units_step = int(gridDim.x) / kCluster;

  if (tid < 128) {
    // ---- producer: one thread streams every tile's A and B stages ----
    setmaxnreg_dec<kProducerRegs>();
    if (tid != 0) return;
    tma_prefetch_map(&map_a);
    tma_prefetch_map(&map_b);
    int it = 0;
    // This CTA's share of B: all of it, or half multicast to both CTAs of the pair.
    auto load_b = [&](void* dst, uint64_t* bar, int c0, int c1, int c2) {
      constexpr uint16_t kAll = (1 << kCluster) - 1;

      if constexpr (kRowsK && kCluster > 1)
        tma_load_2d_multicast(dst, &map_b, bar, c0, c1, kAll);
      else if constexpr (kRowsK)
        tma_load_2d(dst, &map_b, bar, c0, c1);
      else if constexpr (kCluster > 1)
        tma_load_3d_multicast(dst, &map_b, bar, c0, c1, c2, kAll);
      else
        tma_load_3d(dst, &map_b, bar, c0, c1, c2);
    };
    // Each tile is decoded a tile ahead, so that the offsets' loads and the search run while
    // the stages of the tile before are issued.
    Tile tile =
        decode_next<L, kTileN, kCluster, Cfg::kBK>(p, prefix, first_unit, total, rank, Tile{});
    for (int t = first_unit; t < total; t += units_step) {
      const Tile next =
          decode_next<L, kTileN, kCluster, Cfg::kBK>(p, prefix, t + units_step, total, rank, tile);
      for (int kt = 0; kt < tile.k_tiles; ++kt, ++it) {
        const int s = it % Cfg::kStages;
        const int round = it / Cfg::kStages;
        if (round > 0) mbar_wait(&empty[s], (round - 1) & 1);
        uint8_t* sa = smem + s * Cfg::kStageBytes;
        uint8_t* sb = sa + Cfg::kABytes;
        if constexpr (Cfg::kColScales) {
          // The stage's block of rows: the A tile's row scales and the B tile's column scales
          // (128 x 1 blocks down each group's rows, block kb of column m at kb * M + m from the
          // group's first block), as many as the operands have from m0 and n0.
          const int64_t kb = blocks_before[tile.g] + kt;
          const int a_cols = max(0, min(kBM, p.M - tile.m0)), b_cols = min(BN, p.N - tile.n0);
          mbar_arrive_expect_tx(&full[s],
                                Cfg::kStageBytes - Cfg::kScaleBytes + 4 * (a_cols + b_cols));
          float* scales = reinterpret_cast<float*>(sb + Cfg::kBBytes);
          if (a_cols > 0) bulk_load(scales, p.a_scales + kb * p.M + tile.m0, 4 * a_cols, &full[s]);
          bulk_load(scales + kBM, p.b_scales + kb * p.N + tile.n0, 4 * b_cols, &full[s]);
        } else if constexpr (Cfg::kRowScales) {
          // The stage's block of K: the tile's rows' scales, one 16-byte-multiple bulk copy where
          // the group's scales allow it (align 16, as the FP8 step has; else the consumers load
          // them themselves).
          const int a_rows = max(0, min(kBM, tile.rows - tile.m0));
          const float* src = row_scales_of(p, tile, kt) + tile.m0;
          const bool copy = a_rows > 0 && rows_scales_copyable(p, tile);
          mbar_arrive_expect_tx(&full[s],
                                Cfg::kStageBytes - Cfg::kScaleBytes + (copy ? 4 * a_rows : 0));
          if (copy)
            bulk_load(smem + s * Cfg::kStageBytes + Cfg::kABytes + Cfg::kBBytes, src, 4 * a_rows,
                      &full[s]);
        } else {
          mbar_arrive_expect_tx(&full[s], Cfg::kStageBytes);
        }
        if constexpr (kRowsK && kFp8) {
          // Transposed operands: K (the group's rows) along each 128-byte row.
          const int k0 = int(tile.r0) + kt * Cfg::kBK;
          tma_load_2d(sa, &map_a, &full[s], k0, tile.m0);
          load_b(sb + rank * (BN / kCluster) * 128, &full[s], k0, tile.n0 + rank * (BN / kCluster),
                 0);
        } else if constexpr (kRowsK) {
          const int row = int(tile.r0) + kt * Cfg::kBK;
#pragma unroll
          for (int j = 0; j < kBM / 64; ++j)
            tma_load_2d(sa + j * Cfg::kLoadBox, &map_a, &full[s], tile.m0 + 64 * j, row);
#pragma unroll
          for (int j = rank; j < BN / 64; j += kCluster)
            load_b(sb + j * Cfg::kLoadBox, &full[s], tile.n0 + 64 * j, row, 0);
        } else {
          tma_load_2d(sa, &map_a, &full[s], kt * Cfg::kBK, int(tile.r0) + tile.m0);
          if constexpr (kBKMajor) {
            // BN / kCluster rows of 128 bytes per CTA.
            load_b(sb + rank * (BN / kCluster) * 128, &full[s], kt * Cfg::kBK,
                   tile.n0 + rank * (BN / kCluster), tile.g);
          } else {
#pragma unroll
            for (int j = rank; j < BN / 64; j += kCluster) {
              // With SwiGLU: boxes [0, BN / 128) are gate columns, the rest their up partners.
              const int col = !kSwiGLU || j < BN / 128
                                  ? tile.n0 + 64 * j
                                  : p.tile_cols + tile.n0 + 64 * (j - BN / 128);
              load_b(sb + j * Cfg::kLoadBox, &full[s], col, kt * Cfg::kBK, tile.g);
            }
          }
        }
      }
      tile = next;
    }
    if constexpr (kCluster > 1) {
      // Stay until both CTAs' consumers have released every stage issued: the peer still
      // arrives on this CTA's barriers, and multicasts into its shared memory, until then.
      for (int i = 0; i < Cfg::kStages; ++i, ++it)
        if (it >= Cfg::kStages) mbar_wait(&empty[it % Cfg::kStages], (it / Cfg::kStages - 1) & 1);
    }
    return;
  }

  // ---- consumers: warpgroup c multiplies rows [64c, 64c + 64) of each tile (cooperative), or
  // every other tile whole (ping-pong) ----
  setmaxnreg_inc<kConsumerRegs>();
  const int c = tid / 128 - 1;
  const int t128 = tid % 128, warp = t128 / 32, lane = t128 % 32;
  const uint32_t wg_barrier = 2 + c;  // named barrier of this warpgroup alone
  uint8_t* boxes_c = epilogue + c * Cfg::kEpilogueBoxes * Cfg::kBoxBytes;
  float acc[kHalves][BN / 2];
  // FP8: the stages' partial sums, even and odd stages in turn.
  float part[2][kHalves][kFp8 && !kFp8Wide ? BN / 2 : 1];
  float half_part[kFp8Wide ? 64 : 1];  // FP8 on 256 columns: one column half's partial sum
  // A stage's buffers go back to the producers of every CTA that writes into them.
  auto release = [&](int s) {
    if (t128 != 0) return;
    mbar_arrive(&empty[s]);
    if constexpr (kCluster > 1) mbar_arrive_cluster(&empty[s], uint32_t(rank ^ 1));
  };
  auto k_tiles_of = [&](int t) {
    return decode_tile<L, kTileN, kCluster, Cfg::kBK>(p, prefix, t, rank).k_tiles;
  };
  // Ping-pong: this warpgroup's tiles are the CTA's c-th, (c + 2)-th, ...; `it` (the stage
  // iteration, which fixes each stage's slot and phase) skips the other warpgroup's stages.
  int it = kPingpong && c == 1 && first_unit < total ? k_tiles_of(first_unit) : 0;
  const int my_step = kPingpong ? 2 * units_step : units_step;
  const int my_first = first_unit + (kPingpong ? c * units_step : 0);
  // Decoded a tile ahead, as in the producer: the loads and the search run beside the MMAs.
  Tile next = decode_next<L, kTileN, kCluster, Cfg::kBK>(p, prefix, my_first, total, rank, Tile{});
  for (int t = my_first; t < total; t += my_step) {
    const Tile tile = next;
    next = decode_next<L, kTileN, kCluster, Cfg::kBK>(p, prefix, t + my_step, total, rank, tile);
    const bool other_next = kPingpong && t + units_step < total;  // the other's next tile
    // FP8: the group's scale product, loaded now so that the load hides behind the MMAs; the
    // total starts at zero (each stage adds its partial sum).
    float scale = 1.0f;
    if constexpr (kFp8 && !kBlock)
      scale = p.a_scales[int64_t(p.scale_stride) * tile.g] *
              p.b_scales[int64_t(p.scale_stride) * tile.g];
    if (kFp8 || tile.k_tiles == 0) {
#pragma unroll
      for (int h = 0; h < kHalves; ++h)
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[h][i] = 0.0f;
    }
    // Wait for this warpgroup's turn: the other has issued its last tile's MMAs. The turns are
    // also what makes the stage waits sound: a full barrier's parity tells only two rounds of the
    // ring apart, and without them a warpgroup could wait on a stage a round or more ahead of
    // the producer and take the other's stage for its own (a build without them faulted).
    if (kPingpong && t != first_unit) named_barrier_sync(kTurnBarrier + c, 256);
    // The stages whose MMAs may still run: the last (prev), and on the bf16 row GEMMs the one
    // before it (prev2; kInFlight below).
    int prev = -1, prev2 = -1;
    // Waits for the tile's K stage kt (the stage of iteration `it`) and returns its slot.
    auto wait_stage = [&](int kt) {
      const int s = it % Cfg::kStages;
      mbar_wait(&full[s], (it / Cfg::kStages) & 1);
      uint8_t* sa = smem + s * Cfg::kStageBytes;
      uint8_t* sb = sa + Cfg::kABytes;
      if constexpr (kRowsK && kFp8) {
        // The group's last K stage may hold the next group's codes (or, past the last group,
        // whatever the buffer holds): zero them in both operands, as the tail bytes of every
        // 128-byte row, each warpgroup its A half and half of each 128 of B's rows.
        const int valid = tile.rows - kt * Cfg::kBK;
        if (valid < Cfg::kBK) {
          if (t128 < 64) {
            zero_row_tail(sa + (64 * c + t128) * 128, t128 % 8, max(valid, 0));
          } else {
#pragma unroll
            for (int j = 0; j < BN / 128; ++j)
              zero_row_tail(sb + (128 * j + 64 * c + t128 - 64) * 128, t128 % 8, max(valid, 0));
          }
          fence_proxy_async_smem();
          named_barrier_sync(kTailBarrier, kBothConsumers);
        }
      } else if constexpr (kRowsK) {
        // The group's last K stage may hold the next group's rows: zero them in both operands
        // (0 * x must not meet a NaN either), each warpgroup its own A half and half of B's boxes
        // (ping-pong: the stage's one consumer all of them).
        const int valid = tile.rows - kt * Cfg::kBK;
        if (valid < Cfg::kBK) {
          const int bytes = (Cfg::kBK - valid) * 128;
          const uint4 zero = make_uint4(0, 0, 0, 0);
          for (int j = kPingpong ? 0 : c; j < kBM / 64 + BN / 64; j += kPingpong ? 1 : 2) {
            uint8_t* box =
                j < kBM / 64 ? sa + j * Cfg::kLoadBox : sb + (j - kBM / 64) * Cfg::kLoadBox;
            for (int b = t128 * 16; b < bytes; b += 128 * 16)
              *reinterpret_cast<uint4*>(box + valid * 128 + b) = zero;
          }
          fence_proxy_async_smem();
          if constexpr (kPingpong)
            named_barrier_sync(wg_barrier, 128);
          else
            named_barrier_sync(kTailBarrier, kBothConsumers);
        }
      }
      return s;
    };
    // Waits for the tile's K stage kt, issues its MMAs into d (the halves' accumulators; D's old
    // value kept if `accumulate`) and commits them; returns the stage's slot.
    auto issue_stage = [&](int kt, float(&d)[kHalves][BN / 2], bool accumulate) {
      const int s = wait_stage(kt);
      if constexpr (!kFp8Wide) {  // FP8 on 256 columns issues by halves (below)
        uint8_t* sa = smem + s * Cfg::kStageBytes;
        const uint32_t b_base = smem_addr(sa + Cfg::kABytes);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < Cfg::kBK * Cfg::kIn / 32; ++kk) {
          // K-major: the next step is 32 bytes along the swizzled row; MN-major (bf16): 16 rows
          // down.
          const uint64_t db = kTransB ? smem_desc(b_base + kk * 2048, Cfg::kLoadBox, 1024)
                                      : smem_desc(b_base + kk * 32, 16, 1024);
#pragma unroll
          for (int h = 0; h < kHalves; ++h) {
            // The 64-row half's A: rows [64 (h or c), + 64) of the stage's 128.
            const uint32_t a_base = smem_addr(sa) + (kPingpong ? h : c) * Cfg::kLoadBox;
            const uint64_t da = kTransA ? smem_desc(a_base + kk * 2048, Cfg::kLoadBox, 1024)
                                        : smem_desc(a_base + kk * 32, 16, 1024);
            wgmma_tile_step<kTransA, kTransB, BN, InT>(d[h], da, db,
                                                       (accumulate || kk > 0) ? 1 : 0);
          }
        }
        wgmma_commit();
      }
      return s;
    };
    // kInFlight stages' MMAs stay in flight while the next stage is waited for and issued; the
    // one before them is done, so its buffers go back to the producer. Two on the row GEMMs:
    // DeepSeek-V3's steps 1.7-2.0% faster at EP 1 and 2, Mixtral-8x7B's 0-1.6%, Qwen3-30B-A3B's
    // level (H200s); one on the weight gradients, whose short K loops (32-row stages, tiles of a
    // few hundred rows) were up to 25% slower with two (results/2026-11-28-session32, -33).
    constexpr int kInFlight = kRowsK ? 1 : 2;
    auto retire_previous = [&](int s) {
      wgmma_wait<kInFlight>();
      if constexpr (kInFlight == 2) {
        if (prev2 >= 0) release(prev2);
        prev2 = prev;
      } else if (prev >= 0) {
        release(prev);
      }
      prev = s;
      ++it;
    };
    if constexpr (kFp8Wide) {
      // Each K stage: its two 128-column halves in turn, each one's MMAs into half_part, waited
      // for and added (scaled as the recipe says) into its half of the total (the fragment's
      // first 64 elements are columns [0, 128), as m64n256's are); the other warpgroup's MMAs
      // keep the tensor cores busy meanwhile. The stage goes back to the producer after its
      // last add (which may read its column scales).
      const int my_row = tile.m0 + 64 * c + warp * 16 + lane / 4;
      const int64_t group_scales = int64_t(p.scale_stride) * tile.g;
      // fp8_block's row GEMMs: whether the producer copies the rows' scales into the stages.
      bool staged_rows = false;
      if constexpr (Cfg::kRowScales) staged_rows = rows_scales_copyable(p, tile);
      for (int kt = 0; kt < tile.k_tiles; ++kt, ++it) {
        // fp8_block's row GEMMs: the stage's scales of the thread's two rows (0 past the group's
        // rows, never stored) and of the two weight tiles (0 for one wholly past N). The tiles'
        // are loaded before the wait; the rows' come with the stage, or, where they cannot be
        // bulk-copied, are loaded after the wait. (Loaded here before the wait, the adds waited
        // for them: 6-17% slower than 128-column tiles on DeepSeek-V3's shapes; a stage ahead in
        // registers, slower still, with spills.)
        float2 rows_scale = make_float2(0.0f, 0.0f);
        float tile_scale[2] = {0.0f, 0.0f};
        if constexpr (Cfg::kRowScales) {
#pragma unroll
          for (int nh = 0; nh < 2; ++nh)
            if (tile.n0 + 128 * nh < p.N)
              tile_scale[nh] = __ldg(p.b_scales + group_scales +
                                     (tile.n0 / kFp8BlockEdge + nh) * p.tiles_ld + kt);
        }
        const int s = wait_stage(kt);
        uint8_t* sa = smem + s * Cfg::kStageBytes;
        if constexpr (Cfg::kRowScales) {
          const float* rows_at = row_scales_of(p, tile, kt);
          const float* staged =
              reinterpret_cast<const float*>(sa + Cfg::kABytes + Cfg::kBBytes) - tile.m0;
          if (my_row < tile.rows)
            rows_scale.x = staged_rows ? staged[my_row] : __ldg(rows_at + my_row);
          if (my_row + 8 < tile.rows)
            rows_scale.y = staged_rows ? staged[my_row + 8] : __ldg(rows_at + my_row + 8);
        }
        const uint32_t a_base = smem_addr(sa) + c * Cfg::kLoadBox;
#pragma unroll
        for (int nh = 0; nh < 2; ++nh) {
          // Half nh's B: rows [128 nh, + 128) of the stage's 256, 128 bytes each.
          const uint32_t b_base = smem_addr(sa + Cfg::kABytes) + nh * 128 * 128;
          wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < Cfg::kBK / 32; ++kk)
            wgmma_m64n128k32_e4m3(half_part, smem_desc(a_base + kk * 32, 16, 1024),
                                  smem_desc(b_base + kk * 32, 16, 1024), kk > 0 ? 1 : 0);
          wgmma_commit();
          wgmma_wait<0>();
          float(&total)[64] = *reinterpret_cast<float(*)[64]>(&acc[0][64 * nh]);
          if constexpr (kBlock && kRowsK) {
            const float* scales = reinterpret_cast<const float*>(sa + Cfg::kABytes + Cfg::kBBytes);
            const int r = 64 * c + warp * 16 + lane / 4;
            add_partial_rows_cols(total, half_part, scales[r], scales[r + 8],
                                  scales + kBM + 128 * nh, lane);
          } else if constexpr (Cfg::kRowScales) {
            add_partial_rows(total, half_part, rows_scale.x * tile_scale[nh],
                             rows_scale.y * tile_scale[nh]);
          } else {
            add_partial(total, half_part);
          }
        }
        release(s);
      }
    } else if constexpr (kFp8) {
      // fp8_block's row GEMMs: K stage kt's scales for the thread's two rows of the fragment,
      // each times the weight tile's (rows past the group's end: 0, never stored).
      const int my_row = tile.m0 + 64 * c + warp * 16 + lane / 4;
      auto row_block_scales = [&](int kt) {
        const float* rows_at = row_scales_of(p, tile, kt);
        const float b = __ldg(p.b_scales + int64_t(p.scale_stride) * tile.g +
                              (tile.n0 / kFp8BlockEdge) * p.tiles_ld + kt);
        return make_float2(my_row < tile.rows ? __ldg(rows_at + my_row) * b : 0.0f,
                           my_row + 8 < tile.rows ? __ldg(rows_at + my_row + 8) * b : 0.0f);
      };
      // A stage's partial sum into the total (scaled as the recipe says) and its buffers back to
      // the producer: after the add where the add reads the stage's scales there.
      auto retire_partial = [&](int slot, float(&sum)[BN / 2], float2 rows_scale) {
        if constexpr (kBlock && kRowsK) {
          const float* scales = reinterpret_cast<const float*>(smem + slot * Cfg::kStageBytes +
                                                               Cfg::kABytes + Cfg::kBBytes);
          const int r = 64 * c + warp * 16 + lane / 4;
          add_partial_rows_cols(acc[0], sum, scales[r], scales[r + 8], scales + kBM, lane);
          release(slot);
        } else if constexpr (kBlock) {
          release(slot);
          add_partial_rows(acc[0], sum, rows_scale.x, rows_scale.y);
        } else {
          release(slot);
          add_partial(acc[0], sum);
        }
      };
      // Runs stages [kt, kt + U) into the two partial sums in turn: one stage's MMAs stay in
      // flight while the one before is added into the total; nothing is in flight before or
      // after. Straight-line code, so that the compiler can tell which partial sum each wait
      // leaves in flight (across a loop's back edge it cannot, and serialized the MMAs).
      auto run_chunk = [&](int kt, auto u_tag) {
        constexpr int U = decltype(u_tag)::value;
        int slot[U];
        // fp8_block's row scales of the chunk's stages, loaded at its start, before the adds
        // that use them (loaded as each stage was issued, the adds waited for them: the row
        // GEMMs took 2-9% longer on Mixtral-8x7B's and DeepSeek-V3's shapes). Loading the next
        // chunk's too, or keeping the two scales apart until the add, spilled registers or
        // measured slower.
        float2 rows_scale[U];
        if constexpr (kBlock && !kRowsK) {
#pragma unroll
          for (int u = 0; u < U; ++u) rows_scale[u] = row_block_scales(kt + u);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          slot[u] = issue_stage(kt + u, part[u % 2], false);
          ++it;
          if (u > 0) {
            wgmma_wait<1>();
            retire_partial(slot[u - 1], part[(u - 1) % 2][0], rows_scale[u - 1]);
          }
        }
        wgmma_wait<0>();
        retire_partial(slot[U - 1], part[(U - 1) % 2][0], rows_scale[U - 1]);
      };
      int kt = 0;
      for (; kt + kFp8Chunk <= tile.k_tiles; kt += kFp8Chunk)
        run_chunk(kt, std::integral_constant<int, kFp8Chunk>{});
      if (tile.k_tiles - kt >= 2) {
        run_chunk(kt, std::integral_constant<int, 2>{});
        kt += 2;
      }
      if (kt < tile.k_tiles) run_chunk(kt, std::integral_constant<int, 1>{});
    } else {
      for (int kt = 0; kt < tile.k_tiles; ++kt) retire_previous(issue_stage(kt, acc, kt > 0));
    }
    // The other warpgroup's turn (its MMAs queue behind ours), while this one finishes.
    if (other_next) named_barrier_arrive(kTurnBarrier + (1 - c), 256);
    wgmma_wait<0>();
#pragma unroll
    for (int h = 0; h < kHalves; ++h) fence_accumulators(acc[h]);
    if constexpr (kFp8 && !kBlock) {
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[0][i] *= scale;
    }
    if (prev2 >= 0) release(prev2);
    if (prev >= 0) release(prev);
    if (other_next) it += k_tiles_of(t + units_step);

    // ---- epilogue: 64 x (128 bytes) boxes of C through this warpgroup's staging buffer (the
    // swizzle keeps the fragment's writes free of bank conflicts), then to global memory: by TMA
    // for the dense per-expert gradients, by 16-byte row stores for rows, which must stop at the
    // group's last row. One 64-row half at a time. ----
    constexpr int kBoxCols = 128 / int(sizeof(OutT));
#pragma unroll
    for (int half = 0; half < kHalves; ++half) {
      // The warpgroup's first row of this half in the group's C.
      const int row0 = tile.m0 + (kPingpong ? half : c) * 64;
      float(&frag)[BN / 2] = acc[half];
      if constexpr (kSwiGLU) {
        swiglu_epilogue(p, tile, row0, frag, boxes_c, wg_barrier, t128, warp, lane);
      } else if constexpr (kEpi == GroupedEpilogue::kSwiGLUBackward) {
        swiglu_bwd_epilogue<BN>(p, tile, row0, frag, boxes_c, wg_barrier, t128, warp, lane);
      } else if constexpr (kRowsK) {
        // By rounds of the warpgroup's staging boxes (kEpilogueBoxes): once the stores of the
        // round before have read their boxes, fill them all, then store them all; boxes wholly
        // past C's edge are filled and not stored. The gradient is written once and not read in
        // the step, so its lines go first when L2 needs room: left as they were, they evicted
        // the operands the next tiles re-read (DeepSeek-V3's EP 1 weight gradients 3% faster,
        // results/2026-11-28-session28).
        constexpr int kBoxes = BN / kBoxCols;
#pragma unroll
        for (int q0 = 0; q0 < kBoxes; q0 += Cfg::kEpilogueBoxes) {
          constexpr int kRound = kBoxes < Cfg::kEpilogueBoxes ? kBoxes : Cfg::kEpilogueBoxes;
          if (t128 == 0) tma_store_wait_read<0>();
          named_barrier_sync(wg_barrier, 128);
#pragma unroll
          for (int qq = 0; qq < kRound; ++qq)
            stage_fragment_box<BN>(frag, q0 + qq, boxes_c + qq * Cfg::kBoxBytes, OutT{}, warp,
                                   lane);
          fence_proxy_async_smem();
          named_barrier_sync(wg_barrier, 128);
          if (t128 == 0 && row0 < p.M) {
#pragma unroll
            for (int qq = 0; qq < kRound; ++qq) {
              const int col0 = tile.n0 + (q0 + qq) * kBoxCols;
              if (col0 >= p.N) break;
              const uint8_t* stage_c = boxes_c + qq * Cfg::kBoxBytes;
              if constexpr (kEpi == GroupedEpilogue::kAdd)
                tma_reduce_add_3d(&map_c, stage_c, col0, row0, tile.g);
              else
                tma_store_3d_evict_first(&map_c, stage_c, col0, row0, tile.g);
            }
          }
        }
      } else {
        // One box at a time through the one staging box, stored by rows.
#pragma unroll
        for (int q = 0; q < BN / kBoxCols; ++q) {
          const int col0 = tile.n0 + q * kBoxCols;
          // Boxes wholly past C's edge are skipped (the same for the whole warpgroup).
          if (col0 >= p.N || row0 >= tile.rows) continue;
          named_barrier_sync(wg_barrier, 128);  // every thread has read the box's last contents
          stage_fragment_box<BN>(frag, q, boxes_c, OutT{}, warp, lane);
          named_barrier_sync(wg_barrier, 128);
          OutT* C = static_cast<OutT*>(p.C) + tile.r0 * int64_t(p.N);
          const int chunk = t128 % 8;
          const int col = col0 + chunk * (16 / int(sizeof(OutT)));
#pragma unroll
          for (int pass = 0; pass < 4; ++pass) {
            const int r = pass * 16 + t128 / 8;
            if (row0 + r < tile.rows && col < p.N)
              *reinterpret_cast<uint4*>(C + int64_t(row0 + r) * p.N + col) =
                  *reinterpret_cast<const uint4*>(boxes_c + swizzled(r, chunk * 16));
          }
        }
      }
    }
  }
  if constexpr (kRowsK) {
    if (t128 == 0) tma_store_wait_all();  // shared memory must outlive the stores
  }
}

// ---- host side ----

using EncodeFn = PFN_cuTensorMapEncodeTiled_v12000;

// TMA's element type for T (e4m3 codes as bytes).
template <class T>
constexpr CUtensorMapDataType tma_type() {
  return sizeof(T) == 4   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
         : sizeof(T) == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                          : CU_TENSOR_MAP_DATA_TYPE_UINT8;
}

// A tensor map of T with the 128-byte swizzle; dims and box innermost first, strides in bytes
// for dims 1..rank-1.
template <class T>
CUtensorMap make_map(void* encode, const void* base, int rank, const uint64_t* dims,
                     const uint64_t* strides, const uint32_t* box) {
  CUtensorMap map;
  const uint32_t elem_strides[3] = {1, 1, 1};
  const CUresult rc = reinterpret_cast<EncodeFn>(encode)(
      &map, tma_type<T>(), rank, const_cast<void*>(base), dims, strides, box, elem_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  MOE_CHECK(rc == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed (CUresult "
                                    << int(rc) << ") for a rank-" << rank << " map of dims "
                                    << dims[0] << " x " << dims[1]);
  return map;
}

// A launch's cluster shape: kCluster CTAs along x.
struct ClusterAttr {
  cudaLaunchAttribute attr;
  explicit ClusterAttr(int n) {
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = unsigned(n);
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
  }
};

// The CTAs a persistent launch keeps resident: one per SM, or as many whole clusters as can be
// resident at once (GPCs whose SM count is odd leave an SM out). Also allows the kernel its
// shared memory. Once per kernel (the process drives one device).
template <class Kernel>
int resident_ctas(Kernel kernel, int smem, int cluster, int num_sms) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  if (cluster == 1) return num_sms;
  ClusterAttr c(cluster);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(num_sms / cluster * cluster));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = size_t(smem);
  cfg.attrs = &c.attr;
  cfg.numAttrs = 1;
  int clusters = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg));
  MOE_CHECK(clusters > 0, "grouped sm90 GEMM: no cluster of " << cluster << " CTAs fits");
  return clusters * cluster;
}

template <GroupedLayout L, int BN, class OutT, GroupedEpilogue kEpi, int kCluster, bool kPingpong,
          class InT = __nv_bfloat16, bool kBlock = false>
void launch(void* encode, int num_sms, int max_ctas, const GroupedGemmShape& s,
            const int64_t* offsets, const void* A, const void* B, void* C, cudaStream_t stream,
            void* aux, const GroupedFp8Scales& scales = {}) {
  constexpr bool kSwiGLU = kEpi == GroupedEpilogue::kSwiGLU;
  constexpr bool kRowsK = L == GroupedLayout::kRowsTTimesRows;
  constexpr uint32_t kBK = uint32_t(k_per_stage<L, InT>());
  const uint64_t rows = uint64_t(std::max<int64_t>(1, s.total_rows)), es_in = sizeof(InT);
  CUtensorMap map_a, map_b, map_c;
  if constexpr (kRowsK && kIsFp8<InT>) {
    // Transposed operands A [M, ld], B [N, ld] (ld = total_rows, the rows along each).
    const uint64_t da[2] = {rows, uint64_t(s.M)}, db[2] = {rows, uint64_t(s.N)}, st[1] = {rows};
    const uint32_t box_a[2] = {kBK, kBM}, box_b[2] = {kBK, uint32_t(BN / kCluster)};
    map_a = make_map<InT>(encode, A, 2, da, st, box_a);
    map_b = make_map<InT>(encode, B, 2, db, st, box_b);
  }
  if constexpr (kRowsK && !kIsFp8<InT>) {
    const uint64_t da[2] = {uint64_t(s.M), rows}, sa[1] = {uint64_t(s.M) * es_in};
    const uint64_t db[2] = {uint64_t(s.N), rows}, sb[1] = {uint64_t(s.N) * es_in};
    const uint32_t box[2] = {64, kBK};
    map_a = make_map<InT>(encode, A, 2, da, sa, box);
    map_b = make_map<InT>(encode, B, 2, db, sb, box);
  }
  if constexpr (kRowsK) {
    // C [G, M, N], stored by 64-row boxes of 128 bytes.
    const uint64_t es = sizeof(OutT), M = uint64_t(s.M), N = uint64_t(s.N);
    const uint64_t dc[3] = {N, M, uint64_t(s.G)}, sc[2] = {N * es, M * N * es};
    const uint32_t box_c[3] = {uint32_t(128 / es), 64, 1};
    map_c = make_map<OutT>(encode, C, 3, dc, sc, box_c);
  } else {
    const uint64_t da[2] = {uint64_t(s.K), rows}, sa[1] = {uint64_t(s.K) * es_in};
    const uint32_t box_a[2] = {kBK, kBM};
    map_a = make_map<InT>(encode, A, 2, da, sa, box_a);
    const uint64_t K = uint64_t(s.K), N = uint64_t(s.N), G = uint64_t(s.G);
    if constexpr (L == GroupedLayout::kRowsTimesWeightT) {
      const uint64_t db[3] = {K, N, G}, sb[2] = {K * es_in, N * K * es_in};
      const uint32_t box_b[3] = {kBK, uint32_t(BN / kCluster), 1};  // each CTA's share
      map_b = make_map<InT>(encode, B, 3, db, sb, box_b);
    } else {
      const uint64_t db[3] = {N, K, G}, sb[2] = {N * es_in, K * N * es_in};
      const uint32_t box_b[3] = {64, kBK, 1};
      map_b = make_map<InT>(encode, B, 3, db, sb, box_b);
    }
    map_c = map_a;  // unused: rows are stored by plain stores, which can stop at a group's end
  }
  const int tile_cols = int(kSwiGLU ? s.N / 2 : s.N);
  const Params p{offsets, int(s.G), int(s.M), int(s.N), int(s.K),           tile_cols,
                 C,       aux,      scales.a, scales.b, int(scales.stride), int(scales.tiles_ld)};
  auto* kernel = grouped_gemm_kernel<L, BN, OutT, kEpi, kCluster, kPingpong, InT, kBlock>;
  constexpr int kSmem = TileConfig<L, BN, InT, OutT, kBlock>::kSmemBytes;
  static const int resident = resident_ctas(kernel, kSmem, kCluster, num_sms);
  // The tile loop strides by the grid: any whole number of clusters covers every tile.
  const int ctas = max_ctas > 0
                       ? std::max(kCluster, std::min(resident, max_ctas / kCluster * kCluster))
                       : resident;
  ClusterAttr cluster(kCluster);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(ctas));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = stream;
  cfg.attrs = &cluster.attr;
  cfg.numAttrs = kCluster > 1 ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, map_a, map_b, map_c, p));
}

// launch() with the tile width and schedule chosen at run time: ping-pong on 128-column tiles,
// else `bn` columns in clusters of sched.cluster CTAs. The fused SwiGLU forward is always
// cooperative on 256 (its tile pairs 128 gate columns with their up partners).
template <GroupedLayout L, class OutT, GroupedEpilogue kEpi = GroupedEpilogue::kStore>
void launch_scheduled(const GroupedSchedule& sched, int bn, void* encode, int num_sms,
                      const GroupedGemmShape& s, const int64_t* offsets, const void* A,
                      const void* B, void* C, cudaStream_t stream, void* aux = nullptr) {
  if constexpr (kEpi != GroupedEpilogue::kSwiGLU) {
    if (sched.pingpong)
      return launch<L, 128, OutT, kEpi, 1, true>(encode, num_sms, sched.max_ctas, s, offsets, A, B,
                                                 C, stream, aux);
    if (bn == 128) {
      if (sched.cluster == 2)
        return launch<L, 128, OutT, kEpi, 2, false>(encode, num_sms, sched.max_ctas, s, offsets, A,
                                                    B, C, stream, aux);
      return launch<L, 128, OutT, kEpi, 1, false>(encode, num_sms, sched.max_ctas, s, offsets, A, B,
                                                  C, stream, aux);
    }
  }
  if (sched.cluster == 2)
    launch<L, 256, OutT, kEpi, 2, false>(encode, num_sms, sched.max_ctas, s, offsets, A, B, C,
                                         stream, aux);
  else
    launch<L, 256, OutT, kEpi, 1, false>(encode, num_sms, sched.max_ctas, s, offsets, A, B, C,
                                         stream, aux);
}

// Refusals every variant shares: the group count, the rows, the operands' alignment.
void add_shared_reasons(std::ostringstream& why, const GroupedGemmShape& s, const void* A,
                        const void* B, const void* C) {
  if (s.G > GroupedGemm::kMaxGroups)
    why << s.G << " groups (at most " << GroupedGemm::kMaxGroups << "); ";
  if (s.total_rows >= (int64_t(1) << 31)) why << s.total_rows << " rows (2^31 at most); ";
  if ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B) |
       reinterpret_cast<uintptr_t>(C)) %
          16 !=
      0)
    why << "an operand is not 16-byte aligned; ";
}

// The reasons gathered as "a; b; ", as one line without the last separator.
std::string reasons_of(const std::ostringstream& why) {
  std::string r = why.str();
  if (!r.empty()) r.resize(r.size() - 2);
  return r;
}

}  // namespace

bool GroupedGemm::runs_on_current_device() {
  int dev = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return major == 9 && minor == 0;
}

GroupedGemm::GroupedGemm() {
  MOE_CHECK(runs_on_current_device(), "the grouped sm90 GEMM needs an sm_90 GPU (H100/H200)");
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, dev));
  cudaDriverEntryPointQueryResult found{};
  CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &encode_, 12000,
                                              cudaEnableDefault, &found));
  MOE_CHECK(found == cudaDriverEntryPointSuccess && encode_,
            "the CUDA driver has no cuTensorMapEncodeTiled (needs a driver for CUDA 12 or later)");
}

std::string GroupedGemm::unsupported_reason(const GroupedGemmShape& s, const void* A, const void* B,
                                            const void* C, DType in, DType out) {
  std::ostringstream why;
  const bool rows_k = s.layout == GroupedLayout::kRowsTTimesRows;
  if (in != DType::kBf16) why << "inputs are " << dtype_name(in) << ", not bf16; ";
  if (rows_k ? s.M % 8 != 0 : s.K % 8 != 0)
    why << (rows_k ? "M " : "K ") << (rows_k ? s.M : s.K) << " is not a multiple of 8; ";
  if (s.N % 8 != 0) why << "N " << s.N << " is not a multiple of 8; ";
  add_shared_reasons(why, s, A, B, C);
  if (out != DType::kBf16 && out != DType::kFp32) why << "output is " << dtype_name(out) << "; ";
  return reasons_of(why);
}

std::string GroupedGemm::fused_unsupported_reason(const GroupedGemmShape& s, GroupedEpilogue epi,
                                                  DType out) {
  std::ostringstream why;
  if (epi == GroupedEpilogue::kSwiGLU) {
    if (s.layout != GroupedLayout::kRowsTimesWeight) why << "not the up projection; ";
    if (s.N % 256 != 0) why << "F " << s.N / 2 << " is not a multiple of 128; ";
  } else if (epi == GroupedEpilogue::kSwiGLUBackward) {
    if (s.layout != GroupedLayout::kRowsTimesWeightT) why << "not a data gradient; ";
  } else if (epi == GroupedEpilogue::kAdd) {
    if (s.layout != GroupedLayout::kRowsTTimesRows) why << "adds only into weight gradients; ";
    if (out != DType::kFp32) why << "adds into " << dtype_name(out) << ", not fp32; ";
  }
  if (fuses_swiglu(epi) && out != DType::kBf16)
    why << "output " << dtype_name(out) << ", not bf16; ";
  return reasons_of(why);
}

void GroupedGemm::run_fused(GroupedEpilogue epi, const GroupedGemmShape& s, const int64_t* offsets,
                            const void* A, const void* B, void* C, void* aux, DType in, DType out,
                            cudaStream_t stream) const {
  if (epi == GroupedEpilogue::kStore) return run(s, offsets, A, B, C, in, out, stream);
  const std::string why =
      unsupported_reason(s, A, B, C, in, out) + fused_unsupported_reason(s, epi, out) +
      (reinterpret_cast<uintptr_t>(aux) % 16 ? "aux is not 16-byte aligned" : "");
  MOE_CHECK(why.empty(), "grouped sm90 GEMM with a fused epilogue: " << why);
  if (s.G == 0 || s.N == 0 || s.total_rows == 0) return;
  using T = __nv_bfloat16;
  const int bn = tile_n(s);
  if (epi == GroupedEpilogue::kAdd)
    launch_scheduled<GroupedLayout::kRowsTTimesRows, float, GroupedEpilogue::kAdd>(
        sched_, bn, encode_, num_sms_, s, offsets, A, B, C, stream);
  else if (epi == GroupedEpilogue::kSwiGLU)
    launch_scheduled<GroupedLayout::kRowsTimesWeight, T, GroupedEpilogue::kSwiGLU>(
        sched_, bn, encode_, num_sms_, s, offsets, A, B, C, stream, aux);
  else
    launch_scheduled<GroupedLayout::kRowsTimesWeightT, T, GroupedEpilogue::kSwiGLUBackward>(
        sched_, bn, encode_, num_sms_, s, offsets, A, B, C, stream, aux);
}

std::string GroupedGemm::fp8_unsupported_reason(const GroupedGemmShape& s, const void* A,
                                                const void* B, const void* C, GroupedEpilogue epi,
                                                DType out, const GroupedFp8Scales* scales) {
  std::ostringstream why;
  if (scales && scales->block && s.layout == GroupedLayout::kRowsTTimesRows) {
    // The column scales go to shared memory in 16-byte bulk copies.
    if (s.M % 4 != 0) why << "block scales: M " << s.M << " is not a multiple of 4; ";
    if ((reinterpret_cast<uintptr_t>(scales->a) | reinterpret_cast<uintptr_t>(scales->b)) % 16)
      why << "block scales: not 16-byte aligned; ";
  }
  if (scales && scales->block && s.layout == GroupedLayout::kRowsTimesWeightT &&
      scales->tiles_ld < (s.K + kFp8Block - 1) / kFp8Block)
    why << "block scales: a weight tile row of " << scales->tiles_ld << " for K " << s.K << "; ";
  if (s.layout == GroupedLayout::kRowsTimesWeight)
    why << "FP8 reads the weights transposed (kRowsTimesWeightT), not as stored; ";
  if (s.layout == GroupedLayout::kRowsTimesWeightT) {
    if (epi != GroupedEpilogue::kStore && epi != GroupedEpilogue::kSwiGLUBackward)
      why << "FP8 data gradients fuse only SwiGLU's backward; ";
    if (out != DType::kBf16) why << "output " << dtype_name(out) << ", not bf16; ";
    if (s.K % 16 != 0) why << "K " << s.K << " is not a multiple of 16; ";
  }
  if (s.layout == GroupedLayout::kRowsTTimesRows) {
    if (epi != GroupedEpilogue::kStore && epi != GroupedEpilogue::kAdd)
      why << "FP8 weight gradients store or add; ";
    if (epi == GroupedEpilogue::kAdd && out != DType::kFp32) why << "adds into bf16; ";
    if (s.total_rows % 16 != 0)
      why << "the transposed operands' rows (" << s.total_rows << ") not a multiple of 16; ";
  }
  if (s.N % 8 != 0) why << "N " << s.N << " is not a multiple of 8; ";
  add_shared_reasons(why, s, A, B, C);
  return reasons_of(why);
}

void GroupedGemm::run_fp8(GroupedEpilogue epi, const GroupedGemmShape& s, const int64_t* offsets,
                          const void* A, const void* B, const GroupedFp8Scales& scales, void* C,
                          void* aux, DType out, cudaStream_t stream) const {
  const std::string why = fp8_unsupported_reason(s, A, B, C, epi, out, &scales);
  MOE_CHECK(why.empty(), "grouped sm90 GEMM (FP8): " << why);
  MOE_CHECK(scales.a && scales.b, "grouped sm90 GEMM (FP8): no scales");
  const bool rows_k = s.layout == GroupedLayout::kRowsTTimesRows;
  if (s.G == 0 || s.N == 0 || (rows_k ? s.M == 0 : s.total_rows == 0)) return;
  MOE_CHECK(rows_k || s.K > 0, "grouped sm90 GEMM (FP8): K == 0 with rows");
  const int bn = tile_n(s);
  MOE_CHECK(bn == 128 || bn == 256, "grouped sm90 GEMM (FP8): tile width " << bn);
  auto with_scales = [&](auto layout_tag, auto out_tag, auto epi_tag, auto block_tag) {
    constexpr GroupedLayout L = decltype(layout_tag)::value;
    using OutT = std::remove_pointer_t<decltype(out_tag)>;
    constexpr GroupedEpilogue E = decltype(epi_tag)::value;
    constexpr bool kBlock = decltype(block_tag)::value;
    auto go_bn = [&](auto bn_tag) {
      constexpr int BN = decltype(bn_tag)::value;
      if (sched_.cluster == 2)
        launch<L, BN, OutT, E, 2, false, e4m3, kBlock>(encode_, num_sms_, sched_.max_ctas, s,
                                                       offsets, A, B, C, stream, aux, scales);
      else
        launch<L, BN, OutT, E, 1, false, e4m3, kBlock>(encode_, num_sms_, sched_.max_ctas, s,
                                                       offsets, A, B, C, stream, aux, scales);
    };
    if (bn == 256)
      go_bn(std::integral_constant<int, 256>{});
    else
      go_bn(std::integral_constant<int, 128>{});
  };
  auto go = [&](auto layout_tag, auto out_tag, auto epi_tag) {
    if (scales.block)
      with_scales(layout_tag, out_tag, epi_tag, std::true_type{});
    else
      with_scales(layout_tag, out_tag, epi_tag, std::false_type{});
  };
  using RWT = std::integral_constant<GroupedLayout, GroupedLayout::kRowsTimesWeightT>;
  using RTR = std::integral_constant<GroupedLayout, GroupedLayout::kRowsTTimesRows>;
  using Store = std::integral_constant<GroupedEpilogue, GroupedEpilogue::kStore>;
  auto* bf16 = static_cast<__nv_bfloat16*>(nullptr);
  auto* fp32 = static_cast<float*>(nullptr);
  if (!rows_k) {
    if (epi == GroupedEpilogue::kSwiGLUBackward)
      go(RWT{}, bf16, std::integral_constant<GroupedEpilogue, GroupedEpilogue::kSwiGLUBackward>{});
    else
      go(RWT{}, bf16, Store{});
  } else if (epi == GroupedEpilogue::kAdd) {
    go(RTR{}, fp32, std::integral_constant<GroupedEpilogue, GroupedEpilogue::kAdd>{});
  } else if (out == DType::kFp32) {
    go(RTR{}, fp32, Store{});
  } else {
    go(RTR{}, bf16, Store{});
  }
}

void GroupedGemm::check_schedule(const GroupedSchedule& sched) {
  MOE_CHECK(sched.cluster == 1 || sched.cluster == 2,
            "grouped sm90 GEMM: cluster of " << sched.cluster << " CTAs (1 or 2)");
  MOE_CHECK(!sched.pingpong || sched.cluster == 1,
            "grouped sm90 GEMM: ping-pong runs single CTAs, not clusters of " << sched.cluster);
}

void GroupedGemm::set_schedule(const GroupedSchedule& sched) {
  check_schedule(sched);
  sched_ = sched;
}

int GroupedGemm::tile_n_for(const GroupedGemmShape& s) { return s.N <= 128 ? 128 : 256; }

int GroupedGemm::tile_n(const GroupedGemmShape& s) const {
  return forced_tile_n_ ? forced_tile_n_ : tile_n_for(s);
}

void GroupedGemm::run(const GroupedGemmShape& s, const int64_t* offsets, const void* A,
                      const void* B, void* C, DType in, DType out, cudaStream_t stream) const {
  const std::string why = unsupported_reason(s, A, B, C, in, out);
  MOE_CHECK(why.empty(), "grouped sm90 GEMM: " << why);
  if (s.G == 0 || s.N == 0 || (s.layout == GroupedLayout::kRowsTTimesRows && s.M == 0)) return;
  if (s.layout != GroupedLayout::kRowsTTimesRows && (s.total_rows == 0 || s.K == 0)) {
    MOE_CHECK(s.K > 0 || s.total_rows == 0, "grouped sm90 GEMM: K == 0 with rows");
    return;
  }
  const int bn = tile_n(s);
  MOE_CHECK(bn == 128 || bn == 256, "grouped sm90 GEMM: tile width " << bn);
  auto go = [&](auto layout_tag, auto out_tag) {
    constexpr GroupedLayout L = decltype(layout_tag)::value;
    using OutT = std::remove_pointer_t<decltype(out_tag)>;
    launch_scheduled<L, OutT>(sched_, bn, encode_, num_sms_, s, offsets, A, B, C, stream);
  };
  auto with_out = [&](auto layout_tag) {
    if (out == DType::kBf16)
      go(layout_tag, static_cast<__nv_bfloat16*>(nullptr));
    else
      go(layout_tag, static_cast<float*>(nullptr));
  };
  using RW = std::integral_constant<GroupedLayout, GroupedLayout::kRowsTimesWeight>;
  using RWT = std::integral_constant<GroupedLayout, GroupedLayout::kRowsTimesWeightT>;
  using RTR = std::integral_constant<GroupedLayout, GroupedLayout::kRowsTTimesRows>;
  switch (s.layout) {
    case GroupedLayout::kRowsTimesWeight:
      with_out(RW{});
      break;
    case GroupedLayout::kRowsTimesWeightT:
      with_out(RWT{});
      break;
    case GroupedLayout::kRowsTTimesRows:
      with_out(RTR{});
      break;
  }
}

}  // namespace moe::cuda
