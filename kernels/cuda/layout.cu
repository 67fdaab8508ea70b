#include <algorithm>
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "core/error.h"
#include "core/router_scratch.h"
#include "kernels/cuda/block_scan.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/layout.h"
#include "kernels/cuda/storage.cuh"

namespace moe::cuda {
namespace {

// ---- layout dropping by probability (or with more experts than the ranges below hold): one
// block per expert scans the routing in (t, k) order, so positions inside an expert's block
// follow t*K + k exactly as on the CPU, with no atomics. ----

// expert_counts gets the rows kept (at most `limit` of them); raw_counts, when given, the rows
// routed before drops, which the probability policy needs to find each expert's segment.
__global__ void layout_count_kernel(const int32_t* idx, int64_t n, int32_t limit,
                                    int32_t* expert_counts, int32_t* raw_counts) {
  using Reduce = cub::BlockReduce<int, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const int e = blockIdx.x;
  int c = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) c += idx[i] == e;
  c = Reduce(tmp).Sum(c);
  if (threadIdx.x == 0) {
    expert_counts[e] = min(c, limit);
    if (raw_counts) raw_counts[e] = c;
  }
}

// Sum of v[0..e) over the block (the result is valid in thread 0 only).
__device__ int block_prefix(const int32_t* v, int e) {
  using Reduce = cub::BlockReduce<int, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  int s = 0;
  for (int j = threadIdx.x; j < e; j += kThreads) s += v[j];
  s = Reduce(tmp).Sum(s);
  __syncthreads();  // tmp is reused by the next call
  return s;
}

// The drop-by-probability order as one unique integer per row: larger key = kept first. The high
// half orders p (the CPU compares p[a] > p[b] in fp32, so -0 and +0 are one value); the low half
// puts the lower t*K + k first among equal p, as the CPU's stable sort does.
__device__ __forceinline__ uint64_t drop_key(const float* p, int32_t i) {
  uint32_t b = __float_as_uint(p[i]);
  if ((b << 1) == 0) b = 0;
  b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (uint64_t(b) << 32) | (0xffffffffu - uint32_t(i));
}

// Calls row(i, r) for each i in [0, n) that marked(i) holds for, r being its rank among those in
// i order, and unmarked(i) for the others, tile by tile; the whole block must call it. Each
// thread takes kItems consecutive i of a tile, so that a tile needs one block scan; marked(i) is
// evaluated once per i.
template <int kItems, class Marked, class Row, class Unmarked>
__device__ void for_each_marked(int64_t n, Marked marked, Row row, Unmarked unmarked) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int seen;
  if (threadIdx.x == 0) seen = 0;
  __syncthreads();
  for (int64_t start = 0; start < n; start += int64_t(kThreads) * kItems) {
    const int64_t first = start + int64_t(threadIdx.x) * kItems;
    uint32_t bits = 0;
#pragma unroll
    for (int j = 0; j < kItems; ++j)
      if (first + j < n && marked(first + j)) bits |= 1u << j;
    int before = 0, total = 0;
    Scan(tmp).ExclusiveSum(__popc(bits), before, total);
    int r = seen + before;
    for (int j = 0; j < kItems; ++j) {
      if ((bits >> j) & 1u)
        row(int32_t(first + j), r++);
      else if (first + j < n)
        unmarked(int32_t(first + j));
    }
    __syncthreads();
    if (threadIdx.x == 0) seen += total;
    __syncthreads();
  }
}

template <int kItems, class Marked, class Row>
__device__ void for_each_marked(int64_t n, Marked marked, Row row) {
  for_each_marked<kItems>(n, marked, row, [](int32_t) {});
}

// Calls row(i, r) for each row i routed to expert e, r being its rank among them in t*K + k
// order. 16 rows a thread: one scan per kThreads rows made the layout's block per expert scan its
// 32768 rows (4096 tokens, top-8) in 128 dependent steps (81 us on an H100).
template <class Row>
__device__ void for_each_expert_row(const int32_t* idx, int64_t n, int e, Row row) {
  for_each_marked<16>(
      n, [&](int64_t i) { return idx[i] == e; }, row);
}

// The key of the limit-th largest of the expert's rows rows[0..m), m > limit: a most-significant-
// digit-first radix select, 8 bits a pass, on exact integer counts (deterministic).
__device__ uint64_t select_threshold(const int32_t* rows, int m, const float* p, int limit) {
  __shared__ int hist[256];
  __shared__ uint64_t s_prefix;
  __shared__ int s_rank;  // rank, from the top, of the wanted key among those matching s_prefix
  if (threadIdx.x == 0) {
    s_prefix = 0;
    s_rank = limit - 1;
  }
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kThreads) hist[b] = 0;
    __syncthreads();
    const uint64_t prefix = s_prefix;
    const uint64_t high = shift == 56 ? 0 : ~uint64_t(0) << (shift + 8);
    for (int r = threadIdx.x; r < m; r += kThreads) {
      const uint64_t k = drop_key(p, rows[r]);
      if ((k & high) == prefix) atomicAdd(&hist[(k >> shift) & 0xff], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int rank = s_rank, b = 255;
      while (rank >= hist[b]) rank -= hist[b--];  // terminates: rank < the keys counted
      s_rank = rank;
      s_prefix = prefix | (uint64_t(b) << shift);
    }
    __syncthreads();
  }
  return s_prefix;
}

// Positions: an expert's kept rows fill its block in t*K + k order from base = the rows kept by
// the experts before it. By position the first `limit` rows are kept. By probability, when the
// expert has more than `limit` rows, they are gathered (in t*K + k order) into its segment of
// `rows`, the `limit` largest drop keys are found by a radix select, and a second scan over the
// segment places the rows at or above the threshold.
__global__ void layout_position_kernel(const int32_t* idx, const float* p, int64_t n, int32_t limit,
                                       bool by_probability, const int32_t* expert_counts,
                                       const int32_t* raw_counts, int32_t* rows,
                                       int32_t* send_pos) {
  __shared__ int s_base, s_segment;
  const int e = blockIdx.x;
  const int base = block_prefix(expert_counts, e);
  const int segment = by_probability ? block_prefix(raw_counts, e) : 0;
  if (threadIdx.x == 0) {
    s_base = base;
    s_segment = segment;
  }
  __syncthreads();
  const int b0 = s_base;
  if (!by_probability || raw_counts[e] <= limit) {
    for_each_expert_row(idx, n, e,
                        [&](int32_t i, int r) { send_pos[i] = r < limit ? b0 + r : -1; });
    return;
  }
  int32_t* seg = rows + s_segment;
  const int m = raw_counts[e];
  for_each_expert_row(idx, n, e, [&](int32_t i, int r) { seg[r] = i; });
  __syncthreads();  // seg is read by other threads below
  const uint64_t threshold = select_threshold(seg, m, p, limit);
  for_each_marked<1>(
      m, [&](int64_t r) { return drop_key(p, seg[r]) >= threshold; },
      [&](int32_t r, int placed) { send_pos[seg[r]] = b0 + placed; },
      [&](int32_t r) { send_pos[seg[r]] = -1; });
}

// ---- layout without drops by probability: the rows cut into ranges of kRangeRows, a warp a
// range. A block per expert scanning all T*K rows (the kernels above) read the routing E times,
// 26 us of Qwen3-30B-A3B's step with its counts (128 experts; results/2026-11-29-session40).
// Here each range is counted per expert, a warp per expert scans those counts down the ranges,
// and each range ranks its rows 32 at a time in t*K + k order: 14 us in all on one H200. ----
constexpr int kRangeRows = int(kLayoutRangeRows);  // core's: the scratch is sized by it
constexpr int kRangeWarps = kThreads / 32;         // ranges a block
constexpr int kBatch = kRangeRows / 32;            // a lane's rows of a range, loaded at once
// The position kernel's shared memory: each warp's counter per expert, and each expert's first
// position; within 40 KB, so that with its scan's static shared memory no opt-in is needed.
size_t range_layout_smem(int64_t E) { return sizeof(int32_t) * size_t((kRangeWarps + 1) * E); }
constexpr size_t kRangeMaxSmem = 40 * 1024;

int64_t ranges_of(int64_t n) { return (n + kRangeRows - 1) / kRangeRows; }

// A lane's experts of range r: rows r kRangeRows + lane + 32 j (-1 at or past n).
__device__ inline void load_range(const int32_t* idx, int64_t n, int64_t r, int (&ev)[kBatch]) {
  const int64_t first = r * kRangeRows + threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < kBatch; ++j) ev[j] = first + 32 * j < n ? idx[first + 32 * j] : -1;
}

// range_counts[r * E + e] = rows of range r routed to expert e (exact integer counts).
__global__ void layout_range_count_kernel(const int32_t* idx, int64_t n, int64_t E,
                                          int32_t* range_counts) {
  extern __shared__ int32_t counters[];  // [kRangeWarps][E]
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const int64_t r = int64_t(blockIdx.x) * kRangeWarps + w;
  int32_t* mine = counters + w * E;
  for (int64_t e = lane; e < E; e += 32) mine[e] = 0;
  __syncwarp();
  int ev[kBatch];
  load_range(idx, n, r, ev);
#pragma unroll
  for (int j = 0; j < kBatch; ++j)
    if (ev[j] >= 0) atomicAdd(&mine[ev[j]], 1);
  __syncwarp();
  if (r * kRangeRows < n)
    for (int64_t e = lane; e < E; e += 32) range_counts[r * E + e] = mine[e];
}

// A warp per expert: in place, range_counts[r * E + e] becomes the expert's rows in the ranges
// before r (32 ranges a step, a shuffle scan); expert_counts[e] its rows kept (at most limit).
__global__ void layout_range_scan_kernel(int32_t* range_counts, int64_t ranges, int64_t E,
                                         int32_t limit, int32_t* expert_counts) {
  const int lane = threadIdx.x % 32;
  const int64_t e = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (e >= E) return;  // the whole warp
  int32_t run = 0;
  for (int64_t r0 = 0; r0 < ranges; r0 += 32) {
    const int64_t r = r0 + lane;
    const int32_t c = r < ranges ? range_counts[r * E + e] : 0;
    const int32_t x = warp_inclusive_sum(c);
    if (r < ranges) range_counts[r * E + e] = run + x - c;
    run += __shfl_sync(0xffffffffu, x, 31);
  }
  if (lane == 0) expert_counts[e] = min(run, limit);
}

// Each warp ranks its range's rows 32 at a time: a row's rank among its expert's rows is the
// rows before its range plus those before it in the range, which the warp's counter for the
// expert holds when its group of equal lanes (match_any) comes up. Each block first places the
// experts: the rows kept by the experts before each.
__global__ void layout_range_position_kernel(const int32_t* idx, int64_t n, int64_t E,
                                             int32_t limit, const int32_t* range_before,
                                             const int32_t* expert_counts, int32_t* send_pos) {
  extern __shared__ int32_t counters[];  // [kRangeWarps][E], then base [E]
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  int32_t* base = counters + kRangeWarps * E;
  block_exclusive_scan(
      E, [&](int64_t e) { return int64_t(expert_counts[e]); },
      [&](int64_t e, int64_t before) { base[e] = int32_t(before); });
  const int64_t r = int64_t(blockIdx.x) * kRangeWarps + w;
  if (r * kRangeRows >= n) return;  // the whole warp; no block barrier below
  int32_t* mine = counters + w * E;
  for (int64_t e = lane; e < E; e += 32) mine[e] = range_before[r * E + e];
  int ev[kBatch];
  load_range(idx, n, r, ev);
  __syncwarp();
  const unsigned below = (1u << lane) - 1u;
#pragma unroll
  for (int j = 0; j < kBatch; ++j) {
    const int32_t e = ev[j];
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    const int32_t rank = e >= 0 ? mine[e] + __popc(peers & below) : 0;
    __syncwarp();  // every lane has read its counter before its group's first lane moves it
    if (e >= 0) {
      send_pos[r * kRangeRows + 32 * j + lane] = rank < limit ? base[e] + rank : -1;
      if ((peers & below) == 0) mine[e] += __popc(peers);
    }
    __syncwarp();
  }
}

// Runs the three; false where E needs more shared memory than kRangeMaxSmem.
bool layout_by_ranges(const int32_t* idx, int64_t n, int64_t E, int32_t limit,
                      int32_t* expert_counts, int32_t* send_pos, int32_t* range_counts,
                      cudaStream_t stream) {
  const size_t smem = range_layout_smem(E);
  if (smem > kRangeMaxSmem) return false;
  const int64_t ranges = ranges_of(n);
  const unsigned blocks = unsigned((ranges + kRangeWarps - 1) / kRangeWarps);
  if (ranges > 0) {
    layout_range_count_kernel<<<blocks, kThreads, smem, stream>>>(idx, n, E, range_counts);
    CUDA_CHECK(cudaGetLastError());
  }
  layout_range_scan_kernel<<<blocks_for(32 * E), kThreads, 0, stream>>>(range_counts, ranges, E,
                                                                        limit, expert_counts);
  CUDA_CHECK(cudaGetLastError());
  if (ranges > 0) {
    layout_range_position_kernel<<<blocks, kThreads, smem, stream>>>(idx, n, E, limit, range_counts,
                                                                     expert_counts, send_pos);
    CUDA_CHECK(cudaGetLastError());
  }
  return true;
}

// One thread per gathered row: a binary search over its source's E_local + 1 starts (the last
// one at or before the row, so that empty experts' blocks are skipped), as the CPU twin does.
__global__ void expert_major_positions_kernel(const int32_t* send_pos, const int32_t* starts,
                                              const int32_t* dest, int64_t n,
                                              int64_t rows_per_source, int64_t El, int32_t* pos) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t s = i / rows_per_source;
    const int32_t* first = starts + s * (El + 1);
    const int32_t row = send_pos[i];
    if (row < first[0] || row >= first[El]) {  // another rank's, or dropped (-1)
      pos[i] = -1;
      continue;
    }
    int64_t lo = 0, hi = El;  // first[lo] <= row < first[hi]
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      if (first[mid] <= row)
        lo = mid;
      else
        hi = mid;
    }
    pos[i] = dest[s * El + lo] + (row - first[lo]);
  }
}

// One block of kThreads: each source's starts, then the experts' padded offsets, by block-wide
// scans over the experts (table nullptr: the offsets alone, expert_offsets).
__global__ void expert_blocks_kernel(const int32_t* counts, int64_t ep, int64_t stride,
                                     int64_t first, int64_t El, int64_t align, int32_t* table,
                                     int64_t* offsets) {
  int32_t* dest = table ? table + ep * (El + 1) : nullptr;
  int32_t* rows = table ? dest + ep * El : nullptr;
  for (int64_t s = 0; table && s < ep; ++s) {
    // Source s's rows for the experts before `first` (other ranks' experts) come first.
    const int32_t* c = counts + s * stride;
    block_exclusive_scan(
        first + El + 1, [&](int64_t e) { return e < first + El ? int64_t(c[e]) : 0; },
        [&](int64_t e, int64_t row) {
          if (e >= first) table[s * (El + 1) + (e - first)] = int32_t(row);
        });
  }
  auto rows_of = [&](int64_t l) {
    int64_t n = 0;
    for (int64_t s = 0; s < ep; ++s) n += counts[s * stride + first + l];
    return n;
  };
  block_exclusive_scan(
      El + 1, [&](int64_t l) { return l < El ? (rows_of(l) + align - 1) / align * align : 0; },
      [&](int64_t l, int64_t off) {
        offsets[l] = off;
        if (!table || l == El) return;
        int64_t n = 0;
        for (int64_t s = 0; s < ep; ++s) {
          dest[s * El + l] = int32_t(off + n);
          n += counts[s * stride + first + l];
        }
        rows[l] = int32_t(n);
      });
}

// The chunks travel by value: their counts and offsets are device pointers.
struct MergedChunks {
  ChunkRows chunk[kMaxOverlapChunks];
};

// One thread per local expert: its blocks source after source, chunk after chunk (the twin's
// order), then the experts' padded offsets by one thread, a prefix over E_local values.
__global__ void merge_chunk_layout_kernel(MergedChunks chunks, int64_t C, int64_t ep, int64_t El,
                                          int64_t align, int64_t* offsets, int64_t* blocks) {
  const int64_t n = El * ep * C;
  int64_t* src = blocks;
  int64_t* dst = blocks + n;
  int64_t* rows = blocks + 2 * n;
  // Pass 1: each expert's rows, its blocks' sources and rows, dst relative to the expert.
  for (int64_t l = threadIdx.x; l < El; l += blockDim.x) {
    int64_t at = 0;
    for (int64_t s = 0; s < ep; ++s)
      for (int64_t c = 0; c < C; ++c) {
        const ChunkRows& ch = chunks.chunk[c];
        int64_t before = 0;
        for (int64_t q = 0; q < s; ++q) before += ch.counts[q * ch.stride + l];
        const int64_t b = (l * ep + s) * C + c;
        src[b] = ch.row_begin + ch.offsets[l] + before;
        dst[b] = at;
        rows[b] = ch.counts[s * ch.stride + l];
        at += rows[b];
      }
    offsets[l + 1] = (at + align - 1) / align * align;  // the expert's padded rows, for now
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    offsets[0] = 0;
    for (int64_t l = 0; l < El; ++l) offsets[l + 1] += offsets[l];
  }
  __syncthreads();
  for (int64_t b = threadIdx.x; b < n; b += blockDim.x) dst[b] += offsets[b / (ep * C)];
}

// ---- the deduplicated dispatcher's send plan: block (c, r) takes chunk c of kDedupChunk tokens
// for destination EP rank r and scans them in order, so that wire rows follow token order inside
// each rank's block with no atomics, as on the CPU. A block per rank over all T tokens took most of
// the layout phase at EP 2 (two blocks on the whole GPU); chunks count first, then place. ----
constexpr int64_t kDedupChunk = kThreads;  // one token a thread

// Whether EP rank r's experts (El of them) take any of token t's kept rows.
__device__ __forceinline__ bool rank_takes(const int32_t* idx, const int32_t* send_pos, int64_t t,
                                           int64_t K, int64_t El, int64_t r) {
  for (int64_t k = 0; k < K; ++k)
    if (send_pos[t * K + k] >= 0 && idx[t * K + k] / El == r) return true;
  return false;
}

// chunk_counts [ep, chunks]: the tokens of chunk c that rank r takes.
__global__ void dedup_count_kernel(const int32_t* idx, const int32_t* send_pos, int64_t T,
                                   int64_t K, int64_t El, int32_t* chunk_counts) {
  using Reduce = cub::BlockReduce<int, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const int64_t c = blockIdx.x, r = blockIdx.y;
  const int64_t t = c * kDedupChunk + threadIdx.x;
  const int n = Reduce(tmp).Sum(t < T && rank_takes(idx, send_pos, t, K, El, r) ? 1 : 0);
  if (threadIdx.x == 0) chunk_counts[r * gridDim.x + c] = n;
}

// Rank r's wire rows start after the wire rows of ranks before it, chunk c's after the chunks
// before it; its slots count send positions from its first expert's block. Chunk 0's block
// writes the rank's wire rows.
__global__ void dedup_position_kernel(const int32_t* idx, const float* p,
                                      const int32_t* expert_counts, const int32_t* send_pos,
                                      int64_t T, int64_t K, int64_t El, const int32_t* chunk_counts,
                                      int64_t ep, int32_t* wire_counts, int32_t* wire_pos,
                                      int32_t* slots, float* weights) {
  __shared__ int s_wire, s_rank_begin, s_rank_rows;
  const int64_t c = blockIdx.x, r = blockIdx.y, chunks = gridDim.x;
  const int wire0 = block_prefix(chunk_counts, int(r * chunks + c));
  const int rank_begin = block_prefix(expert_counts, int(r * El));
  const int rank_rows = c == 0 ? block_prefix(chunk_counts + r * chunks, int(chunks)) : 0;
  if (threadIdx.x == 0) {
    s_wire = wire0;
    s_rank_begin = rank_begin;
    s_rank_rows = rank_rows;
  }
  __syncthreads();
  if (c == 0 && threadIdx.x == 0) wire_counts[r] = s_rank_rows;
  const int64_t t0 = c * kDedupChunk, n = min(kDedupChunk, T - t0);
  for_each_marked<1>(
      n, [&](int64_t i) { return rank_takes(idx, send_pos, t0 + i, K, El, r); },
      [&](int32_t i, int m) {
        const int64_t t = t0 + i;
        const int32_t w = s_wire + m;
        wire_pos[t * ep + r] = w;
        for (int64_t k = 0; k < K; ++k) {
          const int32_t sp = send_pos[t * K + k];
          const bool ours = sp >= 0 && idx[t * K + k] / El == r;
          slots[int64_t(w) * K + k] = ours ? sp - s_rank_begin : -1;
          weights[int64_t(w) * K + k] = ours ? p[t * K + k] : 0.0f;
        }
      },
      [&](int32_t i) { wire_pos[(t0 + i) * ep + r] = -1; });
}

}  // namespace

size_t dedup_layout_scratch_bytes(int64_t T, int64_t ep) {
  return sizeof(int32_t) * size_t(ep * std::max<int64_t>(1, (T + kDedupChunk - 1) / kDedupChunk));
}

void dedup_layout(const int32_t* idx, const float* p, const int32_t* expert_counts,
                  const int32_t* send_pos, int64_t T, int64_t K, int64_t E, int64_t ep,
                  int32_t* wire_pos, int32_t* wire_counts, int32_t* slots, float* weights,
                  void* scratch, cudaStream_t stream) {
  MOE_CHECK(ep >= 1 && E % ep == 0, "dedup_layout: " << E << " experts over ep " << ep);
  MOE_CHECK(T * K < (int64_t(1) << 31), "dedup_layout: T*K = " << T * K << " overflows int32");
  MOE_CHECK(scratch, "dedup_layout: scratch of dedup_layout_scratch_bytes needed");
  const dim3 grid(unsigned(std::max<int64_t>(1, (T + kDedupChunk - 1) / kDedupChunk)),
                  unsigned(ep));
  auto* chunk_counts = static_cast<int32_t*>(scratch);
  dedup_count_kernel<<<grid, kThreads, 0, stream>>>(idx, send_pos, T, K, E / ep, chunk_counts);
  CUDA_CHECK(cudaGetLastError());
  dedup_position_kernel<<<grid, kThreads, 0, stream>>>(idx, p, expert_counts, send_pos, T, K,
                                                       E / ep, chunk_counts, ep, wire_counts,
                                                       wire_pos, slots, weights);
  CUDA_CHECK(cudaGetLastError());
}

void expert_offsets(const int32_t* counts, int64_t ep, int64_t stride, int64_t E_local,
                    int64_t align, int64_t* offsets, cudaStream_t stream) {
  MOE_CHECK(align >= 1 && stride >= E_local,
            "expert_offsets: align " << align << ", stride " << stride);
  expert_blocks_kernel<<<1, kThreads, 0, stream>>>(counts, ep, stride, 0, E_local, align, nullptr,
                                                   offsets);
  CUDA_CHECK(cudaGetLastError());
}

void expert_blocks(const int32_t* counts, int64_t ep, int64_t stride, int64_t first,
                   int64_t E_local, int64_t align, int32_t* table, int64_t* offsets,
                   cudaStream_t stream) {
  MOE_CHECK(align >= 1 && stride >= first + E_local,
            "expert_blocks: align " << align << ", stride " << stride << ", first " << first);
  expert_blocks_kernel<<<1, kThreads, 0, stream>>>(counts, ep, stride, first, E_local, align, table,
                                                   offsets);
  CUDA_CHECK(cudaGetLastError());
}

void merge_chunk_layout(const ChunkRows* chunks, int64_t C, int64_t ep, int64_t E_local,
                        int64_t align, int64_t* offsets, int64_t* blocks, cudaStream_t stream) {
  MOE_CHECK(
      C >= 1 && C <= kMaxOverlapChunks && align >= 1,
      "merge_chunk_layout: " << C << " chunks (1 to " << kMaxOverlapChunks << "), align " << align);
  MergedChunks all{};
  for (int64_t c = 0; c < C; ++c) all.chunk[c] = chunks[c];
  merge_chunk_layout_kernel<<<1, 256, 0, stream>>>(all, C, ep, E_local, align, offsets, blocks);
  CUDA_CHECK(cudaGetLastError());
}

__global__ void experts_to_slots_kernel(const int32_t* idx, int64_t n, const int32_t* slot_of,
                                        int32_t* slots) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) slots[i] = slot_of[idx[i]];
}

void experts_to_slots(const int32_t* idx, int64_t n, const int32_t* slot_of, int32_t* slots,
                      cudaStream_t stream) {
  if (n == 0) return;
  experts_to_slots_kernel<<<blocks_for(n), kThreads, 0, stream>>>(idx, n, slot_of, slots);
  CUDA_CHECK(cudaGetLastError());
}

void expert_major_positions(const int32_t* send_pos, const int32_t* starts, const int32_t* dest,
                            int64_t sources, int64_t rows_per_source, int64_t E_local, int32_t* pos,
                            cudaStream_t stream) {
  const int64_t n = sources * rows_per_source;
  if (n == 0) return;
  MOE_CHECK(n < (int64_t(1) << 31), "expert_major_positions: " << n << " rows overflow int32");
  expert_major_positions_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      send_pos, starts, dest, n, rows_per_source, E_local, pos);
  CUDA_CHECK(cudaGetLastError());
}

void dispatch_layout(const int32_t* idx, const float* p, int64_t T, int64_t K, int64_t E,
                     int64_t capacity, bool drop_by_position, int32_t* expert_counts,
                     int32_t* send_pos, void* scratch, cudaStream_t stream) {
  const int64_t n = T * K;
  MOE_CHECK(n < (int64_t(1) << 31), "dispatch_layout: T*K = " << n << " rows overflow int32");
  MOE_CHECK(capacity >= 0, "dispatch_layout: capacity " << capacity);
  // A capacity of n or more drops nothing; 0 is dropless.
  const int32_t limit = capacity > 0 && capacity < n ? int32_t(capacity) : INT32_MAX;
  const bool by_probability = limit != INT32_MAX && !drop_by_position;
  MOE_CHECK(!by_probability || (p && scratch),
            "dispatch_layout: dropping by probability needs p and scratch");
  if (!by_probability && scratch &&
      layout_by_ranges(idx, n, E, limit, expert_counts, send_pos, static_cast<int32_t*>(scratch),
                       stream))
    return;
  int32_t* raw_counts = by_probability ? static_cast<int32_t*>(scratch) : nullptr;
  int32_t* rows = by_probability ? raw_counts + E : nullptr;
  layout_count_kernel<<<int(E), kThreads, 0, stream>>>(idx, n, limit, expert_counts, raw_counts);
  CUDA_CHECK(cudaGetLastError());
  layout_position_kernel<<<int(E), kThreads, 0, stream>>>(
      idx, p, n, limit, by_probability, expert_counts, raw_counts, rows, send_pos);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace moe::cuda
