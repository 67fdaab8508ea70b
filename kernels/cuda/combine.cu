#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "kernels/cuda/combine.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/storage.cuh"

namespace moe::cuda {
namespace {

// ---- combine: one block per token (or routed row); each thread takes N consecutive elements
// of the row at a time (N = kPack16<T> when rows allow 16-byte moves, else 1), the same
// per-element arithmetic either way. ----
// O: the storage type T, or float for the fp32 sums (combine_fwd_f32).
template <class T, class O, int N>
__global__ void unpermute_combine_kernel(const T* y_send, const int32_t* send_pos, const float* p,
                                         int64_t T_, int64_t K, int64_t H, O* out) {
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

// One warp per routed row (kThreads / 32 rows a block), its dot product summed across the warp
// by shuffles: a block per row left each of its 256 threads one 16-byte chunk of a 2048-wide row
// and a block-wide reduction with its barriers (94 us of Qwen3-30B-A3B's step at 2.8 TB/s,
// results/2026-11-29-session39). dp sums in another order than before, the same every run.
template <class T, int N>
__global__ void unpermute_combine_bwd_kernel(const T* dout, const T* y_send,
                                             const int32_t* send_pos, const float* p, int64_t T_,
                                             int64_t K, int64_t H, T* dy_send, float* dp) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t tk = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32; tk < T_ * K;
       tk += warps) {
    const int64_t t = tk / K, row = send_pos[tk];
    if (row < 0) {  // dropped: the output does not depend on its weight (warp-uniform branch)
      if (lane == 0) dp[tk] = 0.0f;
      continue;
    }
    const float w = p[tk];
    float dot = 0.0f;
#pragma unroll 2
    for (int64_t h = lane * int64_t(N); h < H; h += 32 * int64_t(N)) {
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
    for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    if (lane == 0) dp[tk] = dot;
  }
}

// O: float for dx's fp32 sums, or the storage type T (unpermute_sum_storage).
template <class T, class O, int N>
__global__ void unpermute_sum_kernel(const T* dx_send, const int32_t* send_pos, int64_t T_,
                                     int64_t K, int64_t H, O* dx_acc) {
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

// The combine's launch, its output in the storage type or (f32_out) in fp32.
template <bool f32_out>
void launch_combine(const void* y_send, const int32_t* send_pos, const float* p, int64_t T,
                    int64_t K, int64_t H, DType dtype, void* out, cudaStream_t stream) {
  if (T == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    using O = std::conditional_t<f32_out, float, S>;
    auto* k = rows_take_pack16<S>(H, {y_send, out}) ? unpermute_combine_kernel<S, O, kPack16<S>>
                                                    : unpermute_combine_kernel<S, O, 1>;
    k<<<row_grid(T), kThreads, 0, stream>>>(static_cast<const S*>(y_send), send_pos, p, T, K, H,
                                            static_cast<O*>(out));
  });
  CUDA_CHECK(cudaGetLastError());
}

// The sum's launch, its output in fp32 (f32_out) or in the storage type.
template <bool f32_out>
void launch_unpermute_sum(const void* dx_send, const int32_t* send_pos, int64_t T, int64_t K,
                          int64_t H, DType dtype, void* out, cudaStream_t stream) {
  if (T == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    using O = std::conditional_t<f32_out, float, S>;
    auto* k = rows_take_pack16<S>(H, {dx_send, out}) ? unpermute_sum_kernel<S, O, kPack16<S>>
                                                     : unpermute_sum_kernel<S, O, 1>;
    k<<<row_grid(T), kThreads, 0, stream>>>(static_cast<const S*>(dx_send), send_pos, T, K, H,
                                            static_cast<O*>(out));
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void unpermute_combine(const void* y_send, const int32_t* send_pos, const float* p, int64_t T,
                       int64_t K, int64_t H, DType dtype, void* out, cudaStream_t stream) {
  launch_combine<false>(y_send, send_pos, p, T, K, H, dtype, out, stream);
}

void unpermute_combine_f32(const void* y_send, const int32_t* send_pos, const float* p, int64_t T,
                           int64_t K, int64_t H, DType dtype, float* out, cudaStream_t stream) {
  launch_combine<true>(y_send, send_pos, p, T, K, H, dtype, out, stream);
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
    k<<<row_grid((T * K + kThreads / 32 - 1) / (kThreads / 32)), kThreads, 0, stream>>>(
        static_cast<const S*>(dout), static_cast<const S*>(y_send), send_pos, p, T, K, H,
        static_cast<S*>(dy_send), dp);
  });
  CUDA_CHECK(cudaGetLastError());
}

void unpermute_sum(const void* dx_send, const int32_t* send_pos, int64_t T, int64_t K, int64_t H,
                   DType dtype, float* dx_acc, cudaStream_t stream) {
  launch_unpermute_sum<true>(dx_send, send_pos, T, K, H, dtype, dx_acc, stream);
}

void unpermute_sum_storage(const void* dx_send, const int32_t* send_pos, int64_t T, int64_t K,
                           int64_t H, DType dtype, void* out, cudaStream_t stream) {
  launch_unpermute_sum<false>(dx_send, send_pos, T, K, H, dtype, out, stream);
}

}  // namespace moe::cuda
