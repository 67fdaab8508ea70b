#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <initializer_list>

#include "core/error.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/cuda/storage.cuh"

namespace moe::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n, int threads = kThreads) {
  return int(std::min<int64_t>((n + threads - 1) / threads, 65535 * 8));
}

// ---- layout: one block per expert scans the routing in (t, k) order, so positions inside an
// expert's block follow t*K + k exactly as on the CPU, with no atomics. ----

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

// Calls row(i, r) for each row i routed to expert e, r being its rank among them in t*K + k
// order, tile by tile; the whole block must call it.
template <class Row>
__device__ void for_each_expert_row(const int32_t* idx, int64_t n, int e, Row row) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int seen;
  if (threadIdx.x == 0) seen = 0;
  __syncthreads();
  for (int64_t start = 0; start < n; start += kThreads) {
    const int64_t i = start + threadIdx.x;
    const int mine = (i < n && idx[i] == e) ? 1 : 0;
    int before = 0, total = 0;
    Scan(tmp).ExclusiveSum(mine, before, total);
    if (mine) row(int32_t(i), seen + before);
    __syncthreads();
    if (threadIdx.x == 0) seen += total;
    __syncthreads();
  }
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

  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int placed;
  if (threadIdx.x == 0) placed = 0;
  __syncthreads();
  for (int start = 0; start < m; start += kThreads) {
    const int r = start + threadIdx.x;
    const int32_t i = r < m ? seg[r] : 0;
    const int keep = (r < m && drop_key(p, i) >= threshold) ? 1 : 0;
    int before = 0, total = 0;
    Scan(tmp).ExclusiveSum(keep, before, total);
    if (r < m) send_pos[i] = keep ? b0 + placed + before : -1;
    __syncthreads();
    if (threadIdx.x == 0) placed += total;
    __syncthreads();
  }
}

// ---- row moves: one block per row, 16-byte vectors when the row allows. ----
template <class T>
__device__ void copy_row(T* dst, const T* src, int64_t H) {
  if ((H * sizeof(T)) % 16 == 0 && (reinterpret_cast<uintptr_t>(dst) % 16 == 0) &&
      (reinterpret_cast<uintptr_t>(src) % 16 == 0)) {
    const int64_t n = H * sizeof(T) / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) d[j] = s[j];
  } else {
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) dst[j] = src[j];
  }
}

template <class T>
__device__ void zero_row(T* dst, int64_t H) {
  if ((H * sizeof(T)) % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (int64_t j = threadIdx.x; j < int64_t(H * sizeof(T) / 16); j += blockDim.x)
      d[j] = make_uint4(0, 0, 0, 0);
  } else {
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) store_f(dst + j, 0.0f);
  }
}

template <class T>
__global__ void permute_rows_kernel(const T* src, const int32_t* send_pos, int64_t K, int64_t H,
                                    int64_t rows, T* dst) {
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x)
    if (send_pos[i] >= 0)  // -1: dropped by the capacity, not sent
      copy_row(dst + int64_t(send_pos[i]) * H, src + (i / K) * H, H);
}

// Block b = s*E_local + l: offsets[b] in source-rank-major order, offsets[nb + b] in
// expert-major order; prefix sums over the same counts, each expert's rows rounded up to a
// multiple of align, as in expert_major_offsets (core/layout.h).
__global__ void regroup_offsets_kernel(const int32_t* counts, int64_t ep, int64_t El, int64_t align,
                                       int64_t* offsets) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const int64_t nb = ep * El;
  int64_t off = 0;
  for (int64_t b = 0; b < nb; ++b) {
    offsets[b] = off;
    off += counts[b];
  }
  off = 0;
  for (int64_t l = 0; l < El; ++l) {
    const int64_t start = off;
    for (int64_t s = 0; s < ep; ++s) {
      offsets[nb + s * El + l] = off;
      off += counts[s * El + l];
    }
    off = start + (off - start + align - 1) / align * align;
  }
}

// The padding rows of local expert blockIdx.x, between its last block's end and the next multiple
// of align, must be zeros: the GEMMs run over them and the weight gradients sum over them. Its
// first block (s = 0) starts the expert; its last (s = ep - 1) ends the rows.
template <class T>
__global__ void regroup_zero_padding_kernel(const int32_t* counts, const int64_t* offsets,
                                            int64_t ep, int64_t El, int64_t H, int64_t align,
                                            T* dst) {
  const int64_t l = blockIdx.x, nb = ep * El, last = (ep - 1) * El + l;
  const int64_t start = offsets[nb + l], end = offsets[nb + last] + counts[last];
  const int64_t padded = start + (end - start + align - 1) / align * align;
  for (int64_t r = end + blockIdx.y; r < padded; r += gridDim.y) zero_row(dst + r * H, H);
}

template <class T>
__global__ void regroup_rows_kernel(const T* src, const int32_t* counts, const int64_t* offsets,
                                    int64_t nb, int64_t H, int64_t rows, bool to_expert_major,
                                    T* dst) {
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    // i is a row in source-rank-major order: find its block by binary search.
    int64_t lo = 0, hi = nb - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (offsets[mid] <= i)
        lo = mid;
      else
        hi = mid - 1;
    }
    while (counts[lo] == 0 || i >= offsets[lo] + counts[lo]) ++lo;  // skip empty blocks
    const int64_t j = offsets[nb + lo] + (i - offsets[lo]);
    if (to_expert_major)
      copy_row(dst + j * H, src + i * H, H);
    else
      copy_row(dst + i * H, src + j * H, H);
  }
}

// ---- combine: one block per token (or routed row); each thread takes N consecutive elements
// of the row at a time (N = kPack16<T> when rows allow 16-byte moves, else 1), the same
// per-element arithmetic either way. ----
template <class T, int N>
__global__ void unpermute_combine_kernel(const T* y_send, const int32_t* send_pos, const float* p,
                                         int64_t T_, int64_t K, int64_t H, T* out) {
  for (int64_t t = blockIdx.x; t < T_; t += gridDim.x)
    for (int64_t h = threadIdx.x * int64_t(N); h < H; h += int64_t(blockDim.x) * N) {
      float acc[N] = {}, y[N];
      for (int64_t k = 0; k < K; ++k) {
        const int64_t row = send_pos[t * K + k];
        if (row < 0) continue;  // dropped
        const float w = p[t * K + k];
        load_n<N>(y_send + row * H + h, y);
#pragma unroll
        for (int i = 0; i < N; ++i) acc[i] += w * y[i];
      }
      store_n<N>(out + t * H + h, acc);
    }
}

template <class T, int N>
__global__ void unpermute_combine_bwd_kernel(const T* dout, const T* y_send,
                                             const int32_t* send_pos, const float* p, int64_t T_,
                                             int64_t K, int64_t H, T* dy_send, float* dp) {
  using Reduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  for (int64_t tk = blockIdx.x; tk < T_ * K; tk += gridDim.x) {
    const int64_t t = tk / K, row = send_pos[tk];
    if (row < 0) {  // dropped: the output does not depend on its weight (block-uniform branch)
      if (threadIdx.x == 0) dp[tk] = 0.0f;
      continue;
    }
    const float w = p[tk];
    float dot = 0.0f;
    for (int64_t h = threadIdx.x * int64_t(N); h < H; h += int64_t(kThreads) * N) {
      float g[N], y[N], dy[N];
      load_n<N>(dout + t * H + h, g);
      load_n<N>(y_send + row * H + h, y);
#pragma unroll
      for (int i = 0; i < N; ++i) {
        dot += y[i] * g[i];
        dy[i] = w * g[i];
      }
      store_n<N>(dy_send + row * H + h, dy);
    }
    dot = Reduce(tmp).Sum(dot);
    if (threadIdx.x == 0) dp[tk] = dot;
    __syncthreads();
  }
}

template <class T, int N>
__global__ void unpermute_sum_kernel(const T* dx_send, const int32_t* send_pos, int64_t T_,
                                     int64_t K, int64_t H, float* dx_acc) {
  for (int64_t t = blockIdx.x; t < T_; t += gridDim.x)
    for (int64_t h = threadIdx.x * int64_t(N); h < H; h += int64_t(blockDim.x) * N) {
      float acc[N] = {}, x[N];
      for (int64_t k = 0; k < K; ++k) {
        const int64_t row = send_pos[t * K + k];
        if (row < 0) continue;  // dropped
        load_n<N>(dx_send + row * H + h, x);
#pragma unroll
        for (int i = 0; i < N; ++i) acc[i] += x[i];
      }
      store_n<N>(dx_acc + t * H + h, acc);
    }
}

// Whether rows of H elements of T at these bases allow 16-byte moves: whole 16-byte row lengths
// (also for the fp32 rows H * 4 bytes, which then hold whole packs too) and aligned bases.
template <class T>
bool rows_take_pack16(int64_t H, std::initializer_list<const void*> bases) {
  if (H % kPack16<T> != 0) return false;
  for (const void* b : bases)
    if (reinterpret_cast<uintptr_t>(b) % 16 != 0) return false;
  return true;
}

// ---- SwiGLU ----
__device__ __forceinline__ float sigmoidf_(float v) { return 1.0f / (1.0f + expf(-v)); }

// Each thread takes N consecutive elements of a row of a (N divides F; see the combine kernels).
template <class T, int N>
__global__ void swiglu_fwd_kernel(const T* h, int64_t n, int64_t F, T* a) {
  for (int64_t i = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * N; i < n * F;
       i += int64_t(gridDim.x) * blockDim.x * N) {
    const int64_t r = i / F, j = i % F;
    float g[N], u[N], out[N];
    load_n<N>(h + r * 2 * F + j, g);
    load_n<N>(h + r * 2 * F + F + j, u);
#pragma unroll
    for (int e = 0; e < N; ++e) out[e] = g[e] * sigmoidf_(g[e]) * u[e];
    store_n<N>(a + i, out);
  }
}

template <class T, int N>
__global__ void swiglu_bwd_kernel(const T* da, const T* h, int64_t n, int64_t F, T* dh) {
  for (int64_t i = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * N; i < n * F;
       i += int64_t(gridDim.x) * blockDim.x * N) {
    const int64_t r = i / F, j = i % F;
    float g[N], u[N], d[N], dg[N], du[N];
    load_n<N>(h + r * 2 * F + j, g);
    load_n<N>(h + r * 2 * F + F + j, u);
    load_n<N>(da + i, d);
#pragma unroll
    for (int e = 0; e < N; ++e) {
      const float sg = sigmoidf_(g[e]);
      dg[e] = d[e] * u[e] * (sg * (1.0f + g[e] * (1.0f - sg)));
      du[e] = d[e] * (g[e] * sg);
    }
    store_n<N>(dh + r * 2 * F + j, dg);
    store_n<N>(dh + r * 2 * F + F + j, du);
  }
}

template <class T>
__global__ void storage_to_f32_kernel(const T* src, int64_t n, float* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = load_f(src + i);
}

template <class T>
__global__ void f32_to_storage_kernel(const float* src, int64_t n, T* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    store_f(dst + i, src[i]);
}

template <class T>
__global__ void fill_seeded_kernel(InitRule rule, int64_t begin, int64_t n, T* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    store_f(dst + i, rule.value(uint64_t(begin + i)));
}

int row_grid(int64_t rows) { return int(std::max<int64_t>(1, std::min<int64_t>(rows, 1 << 16))); }

}  // namespace

size_t dispatch_layout_scratch_bytes(int64_t T, int64_t K, int64_t E) {
  return sizeof(int32_t) * size_t(E + T * K);
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
  int32_t* raw_counts = by_probability ? static_cast<int32_t*>(scratch) : nullptr;
  int32_t* rows = by_probability ? raw_counts + E : nullptr;
  layout_count_kernel<<<int(E), kThreads, 0, stream>>>(idx, n, limit, expert_counts, raw_counts);
  CUDA_CHECK(cudaGetLastError());
  layout_position_kernel<<<int(E), kThreads, 0, stream>>>(
      idx, p, n, limit, by_probability, expert_counts, raw_counts, rows, send_pos);
  CUDA_CHECK(cudaGetLastError());
}

void permute_rows(const void* src, const int32_t* send_pos, int64_t T, int64_t K, int64_t H,
                  DType dtype, void* dst, cudaStream_t stream) {
  if (T * K == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    permute_rows_kernel<<<row_grid(T * K), 128, 0, stream>>>(static_cast<const S*>(src), send_pos,
                                                             K, H, T * K, static_cast<S*>(dst));
  });
  CUDA_CHECK(cudaGetLastError());
}

void regroup_rows(const void* src, const int32_t* counts, int64_t ep, int64_t E_local, int64_t H,
                  int64_t align, int64_t rows, bool to_expert_major, DType dtype,
                  int64_t* block_offsets, void* dst, cudaStream_t stream) {
  MOE_CHECK(align >= 1, "regroup_rows: align " << align);
  regroup_offsets_kernel<<<1, 32, 0, stream>>>(counts, ep, E_local, align, block_offsets);
  CUDA_CHECK(cudaGetLastError());
  if (rows == 0) return;  // no rows: no padding either
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    if (to_expert_major && align > 1) {
      const dim3 grid(unsigned(E_local), unsigned(std::min<int64_t>(align - 1, 64)));
      regroup_zero_padding_kernel<<<grid, 128, 0, stream>>>(counts, block_offsets, ep, E_local, H,
                                                            align, static_cast<S*>(dst));
    }
    regroup_rows_kernel<<<row_grid(rows), 128, 0, stream>>>(static_cast<const S*>(src), counts,
                                                            block_offsets, ep * E_local, H, rows,
                                                            to_expert_major, static_cast<S*>(dst));
  });
  CUDA_CHECK(cudaGetLastError());
}

void unpermute_combine(const void* y_send, const int32_t* send_pos, const float* p, int64_t T,
                       int64_t K, int64_t H, DType dtype, void* out, cudaStream_t stream) {
  if (T == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    auto* k = rows_take_pack16<S>(H, {y_send, out}) ? unpermute_combine_kernel<S, kPack16<S>>
                                                    : unpermute_combine_kernel<S, 1>;
    k<<<row_grid(T), kThreads, 0, stream>>>(static_cast<const S*>(y_send), send_pos, p, T, K, H,
                                            static_cast<S*>(out));
  });
  CUDA_CHECK(cudaGetLastError());
}

void unpermute_combine_bwd(const void* dout, const void* y_send, const int32_t* send_pos,
                           const float* p, int64_t T, int64_t K, int64_t H, DType dtype,
                           void* dy_send, float* dp, cudaStream_t stream) {
  if (T * K == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    auto* k = rows_take_pack16<S>(H, {dout, y_send, dy_send})
                  ? unpermute_combine_bwd_kernel<S, kPack16<S>>
                  : unpermute_combine_bwd_kernel<S, 1>;
    k<<<row_grid(T * K), kThreads, 0, stream>>>(static_cast<const S*>(dout),
                                                static_cast<const S*>(y_send), send_pos, p, T, K, H,
                                                static_cast<S*>(dy_send), dp);
  });
  CUDA_CHECK(cudaGetLastError());
}

void unpermute_sum(const void* dx_send, const int32_t* send_pos, int64_t T, int64_t K, int64_t H,
                   DType dtype, float* dx_acc, cudaStream_t stream) {
  if (T == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    auto* k = rows_take_pack16<S>(H, {dx_send, dx_acc}) ? unpermute_sum_kernel<S, kPack16<S>>
                                                        : unpermute_sum_kernel<S, 1>;
    k<<<row_grid(T), kThreads, 0, stream>>>(static_cast<const S*>(dx_send), send_pos, T, K, H,
                                            dx_acc);
  });
  CUDA_CHECK(cudaGetLastError());
}

void storage_to_f32(const void* src, int64_t n, DType dtype, float* dst, cudaStream_t stream) {
  if (n == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    storage_to_f32_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const S*>(src), n,
                                                                  dst);
  });
  CUDA_CHECK(cudaGetLastError());
}

void f32_to_storage(const float* src, int64_t n, DType dtype, void* dst, cudaStream_t stream) {
  if (n == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    f32_to_storage_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, n, static_cast<S*>(dst));
  });
  CUDA_CHECK(cudaGetLastError());
}

void fill_seeded(const InitRule& rule, int64_t begin, int64_t n, DType dtype, void* dst,
                 cudaStream_t stream) {
  if (n == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    fill_seeded_kernel<<<blocks_for(n), kThreads, 0, stream>>>(rule, begin, n,
                                                               static_cast<S*>(dst));
  });
  CUDA_CHECK(cudaGetLastError());
}

void swiglu_fwd(const void* h, int64_t n, int64_t F, DType dtype, void* a, cudaStream_t stream) {
  if (n * F == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    // Rows of F (a) and 2F (h) elements: F in whole packs makes both whole.
    const int pack = rows_take_pack16<S>(F, {h, a}) ? kPack16<S> : 1;
    auto* k = pack > 1 ? swiglu_fwd_kernel<S, kPack16<S>> : swiglu_fwd_kernel<S, 1>;
    k<<<blocks_for(n * F / pack), kThreads, 0, stream>>>(static_cast<const S*>(h), n, F,
                                                         static_cast<S*>(a));
  });
  CUDA_CHECK(cudaGetLastError());
}

void swiglu_bwd(const void* da, const void* h, int64_t n, int64_t F, DType dtype, void* dh,
                cudaStream_t stream) {
  if (n * F == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    const int pack = rows_take_pack16<S>(F, {da, h, dh}) ? kPack16<S> : 1;
    auto* k = pack > 1 ? swiglu_bwd_kernel<S, kPack16<S>> : swiglu_bwd_kernel<S, 1>;
    k<<<blocks_for(n * F / pack), kThreads, 0, stream>>>(
        static_cast<const S*>(da), static_cast<const S*>(h), n, F, static_cast<S*>(dh));
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace moe::cuda
