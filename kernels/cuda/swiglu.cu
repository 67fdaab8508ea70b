#include <cstdint>

#include "core/error.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/storage.cuh"
#include "kernels/cuda/swiglu.h"

namespace moe::cuda {
namespace {

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

}  // namespace

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
