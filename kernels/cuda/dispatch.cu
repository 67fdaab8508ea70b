#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/cuda_check.h"
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
__global__ void layout_count_kernel(const int32_t* idx, int64_t n, int32_t* expert_counts) {
  using Reduce = cub::BlockReduce<int, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const int e = blockIdx.x;
  int c = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) c += idx[i] == e;
  c = Reduce(tmp).Sum(c);
  if (threadIdx.x == 0) expert_counts[e] = c;
}

__global__ void layout_position_kernel(const int32_t* idx, int64_t n, int64_t E,
                                       const int32_t* expert_counts, int32_t* send_pos) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int base;
  const int e = blockIdx.x;
  if (threadIdx.x == 0) {
    int off = 0;
    for (int j = 0; j < e; ++j) off += expert_counts[j];
    base = off;
  }
  __syncthreads();
  for (int64_t start = 0; start < n; start += kThreads) {
    const int64_t i = start + threadIdx.x;
    const int mine = (i < n && idx[i] == e) ? 1 : 0;
    int before = 0, total = 0;
    Scan(tmp).ExclusiveSum(mine, before, total);
    if (mine) send_pos[i] = base + before;
    __syncthreads();
    if (threadIdx.x == 0) base += total;
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
__global__ void permute_rows_kernel(const T* src, const int32_t* send_pos, int64_t K, int64_t H,
                                    int64_t rows, T* dst) {
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x)
    copy_row(dst + int64_t(send_pos[i]) * H, src + (i / K) * H, H);
}

// Block b = s*E_local + l: offsets[b] in source-rank-major order, offsets[nb + b] in
// expert-major order; prefix sums over the same counts, as in the CPU twin.
__global__ void regroup_offsets_kernel(const int32_t* counts, int64_t ep, int64_t El,
                                       int64_t* offsets) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const int64_t nb = ep * El;
  int64_t off = 0;
  for (int64_t b = 0; b < nb; ++b) {
    offsets[b] = off;
    off += counts[b];
  }
  off = 0;
  for (int64_t l = 0; l < El; ++l)
    for (int64_t s = 0; s < ep; ++s) {
      offsets[nb + s * El + l] = off;
      off += counts[s * El + l];
    }
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

// ---- combine ----
template <class T>
__global__ void unpermute_combine_kernel(const T* y_send, const int32_t* send_pos, const float* p,
                                         int64_t T_, int64_t K, int64_t H, T* out) {
  for (int64_t t = blockIdx.x; t < T_; t += gridDim.x)
    for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k)
        acc += p[t * K + k] * load_f(y_send + int64_t(send_pos[t * K + k]) * H + h);
      store_f(out + t * H + h, acc);
    }
}

template <class T>
__global__ void unpermute_combine_bwd_kernel(const T* dout, const T* y_send,
                                             const int32_t* send_pos, const float* p, int64_t T_,
                                             int64_t K, int64_t H, T* dy_send, float* dp) {
  using Reduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  for (int64_t tk = blockIdx.x; tk < T_ * K; tk += gridDim.x) {
    const int64_t t = tk / K, row = send_pos[tk];
    const float w = p[tk];
    float dot = 0.0f;
    for (int64_t h = threadIdx.x; h < H; h += kThreads) {
      const float g = load_f(dout + t * H + h);
      dot += load_f(y_send + row * H + h) * g;
      store_f(dy_send + row * H + h, w * g);
    }
    dot = Reduce(tmp).Sum(dot);
    if (threadIdx.x == 0) dp[tk] = dot;
    __syncthreads();
  }
}

template <class T>
__global__ void unpermute_sum_kernel(const T* dx_send, const int32_t* send_pos, int64_t T_,
                                     int64_t K, int64_t H, float* dx_acc) {
  for (int64_t t = blockIdx.x; t < T_; t += gridDim.x)
    for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += load_f(dx_send + int64_t(send_pos[t * K + k]) * H + h);
      dx_acc[t * H + h] = acc;
    }
}

// ---- SwiGLU ----
__device__ __forceinline__ float sigmoidf_(float v) { return 1.0f / (1.0f + expf(-v)); }

template <class T>
__global__ void swiglu_fwd_kernel(const T* h, int64_t n, int64_t F, T* a) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * F;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / F, j = i % F;
    const float g = load_f(h + r * 2 * F + j), u = load_f(h + r * 2 * F + F + j);
    store_f(a + i, g * sigmoidf_(g) * u);
  }
}

template <class T>
__global__ void swiglu_bwd_kernel(const T* da, const T* h, int64_t n, int64_t F, T* dh) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * F;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / F, j = i % F;
    const float g = load_f(h + r * 2 * F + j), u = load_f(h + r * 2 * F + F + j);
    const float sg = sigmoidf_(g), d = load_f(da + i);
    store_f(dh + r * 2 * F + j, d * u * (sg * (1.0f + g * (1.0f - sg))));
    store_f(dh + r * 2 * F + F + j, d * (g * sg));
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

int row_grid(int64_t rows) { return int(std::max<int64_t>(1, std::min<int64_t>(rows, 1 << 16))); }

}  // namespace

void dispatch_layout(const int32_t* idx, const float*, int64_t T, int64_t K, int64_t E,
                     int64_t capacity, bool, int32_t* expert_counts, int32_t* send_pos,
                     cudaStream_t stream) {
  MOE_CHECK(capacity == 0,
            "the CUDA dispatch layout has no capacity drops yet (capacity " << capacity << ")");
  layout_count_kernel<<<int(E), kThreads, 0, stream>>>(idx, T * K, expert_counts);
  CUDA_CHECK(cudaGetLastError());
  layout_position_kernel<<<int(E), kThreads, 0, stream>>>(idx, T * K, E, expert_counts, send_pos);
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
  MOE_CHECK(align == 1, "the CUDA regroup has no expert alignment yet (align " << align << ")");
  regroup_offsets_kernel<<<1, 32, 0, stream>>>(counts, ep, E_local, block_offsets);
  CUDA_CHECK(cudaGetLastError());
  if (rows == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
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
    unpermute_combine_kernel<<<row_grid(T), kThreads, 0, stream>>>(
        static_cast<const S*>(y_send), send_pos, p, T, K, H, static_cast<S*>(out));
  });
  CUDA_CHECK(cudaGetLastError());
}

void unpermute_combine_bwd(const void* dout, const void* y_send, const int32_t* send_pos,
                           const float* p, int64_t T, int64_t K, int64_t H, DType dtype,
                           void* dy_send, float* dp, cudaStream_t stream) {
  if (T * K == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    unpermute_combine_bwd_kernel<<<row_grid(T * K), kThreads, 0, stream>>>(
        static_cast<const S*>(dout), static_cast<const S*>(y_send), send_pos, p, T, K, H,
        static_cast<S*>(dy_send), dp);
  });
  CUDA_CHECK(cudaGetLastError());
}

void unpermute_sum(const void* dx_send, const int32_t* send_pos, int64_t T, int64_t K, int64_t H,
                   DType dtype, float* dx_acc, cudaStream_t stream) {
  if (T == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    unpermute_sum_kernel<<<row_grid(T), kThreads, 0, stream>>>(static_cast<const S*>(dx_send),
                                                               send_pos, T, K, H, dx_acc);
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

void swiglu_fwd(const void* h, int64_t n, int64_t F, DType dtype, void* a, cudaStream_t stream) {
  if (n * F == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    swiglu_fwd_kernel<<<blocks_for(n * F), kThreads, 0, stream>>>(static_cast<const S*>(h), n, F,
                                                                  static_cast<S*>(a));
  });
  CUDA_CHECK(cudaGetLastError());
}

void swiglu_bwd(const void* da, const void* h, int64_t n, int64_t F, DType dtype, void* dh,
                cudaStream_t stream) {
  if (n * F == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    swiglu_bwd_kernel<<<blocks_for(n * F), kThreads, 0, stream>>>(
        static_cast<const S*>(da), static_cast<const S*>(h), n, F, static_cast<S*>(dh));
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace moe::cuda
