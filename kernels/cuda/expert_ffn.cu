#include <cstdint>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/expert_ffn.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/storage.cuh"

namespace moe::cuda {
namespace {

size_t offset_of(DType t, int64_t elems) { return size_t(elems) * stored_bytes(t); }
const char* at(const void* p, size_t bytes) { return static_cast<const char*>(p) + bytes; }
char* at(void* p, size_t bytes) { return static_cast<char*>(p) + bytes; }
// An emptied list that keeps its capacity: the expert GEMM lists allocate in warm-up only.
std::vector<GemmProblem>& reuse(std::vector<GemmProblem>& v) {
  v.clear();
  return v;
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

// ---- the expert FFN: one GEMM per local expert with rows (per weight gradient, every expert),
// as lists the runner launches grouped. ----

void expert_ffn_fwd(const void* xe, const void* w_in, const void* w_out, const int64_t* off,
                    int64_t E_local, int64_t H, int64_t F, DType dtype, void* h, void* a, void* ye,
                    GemmRunner& gemm, ExpertGemmLists& lists, cudaStream_t stream) {
  auto& up = reuse(lists.first);
  auto& down = reuse(lists.second);
  for (int64_t l = 0; l < E_local; ++l) {
    const int64_t r0 = off[l], n = off[l + 1] - off[l];
    if (n == 0) continue;
    up.push_back({n, 2 * F, H, at(xe, offset_of(dtype, r0 * H)),
                  at(w_in, offset_of(dtype, l * H * 2 * F)), at(h, offset_of(dtype, r0 * 2 * F))});
    down.push_back({n, H, F, at(a, offset_of(dtype, r0 * F)),
                    at(w_out, offset_of(dtype, l * F * H)), at(ye, offset_of(dtype, r0 * H))});
  }
  const int64_t rows = off[E_local];
  gemm.grouped(false, false, up, false, dtype, dtype, stream);
  swiglu_fwd(h, rows, F, dtype, a, stream);
  gemm.grouped(false, false, down, false, dtype, dtype, stream);
}

void expert_ffn_bwd_data(const void* dye, const void* h, const void* w_in, const void* w_out,
                         const int64_t* off, int64_t E_local, int64_t H, int64_t F, DType dtype,
                         void* da, void* dh, void* dxe, GemmRunner& gemm, ExpertGemmLists& lists,
                         cudaStream_t stream) {
  auto& dgrad_a = reuse(lists.first);
  auto& dgrad_x = reuse(lists.second);
  for (int64_t l = 0; l < E_local; ++l) {
    const int64_t r0 = off[l], n = off[l + 1] - off[l];
    if (n == 0) continue;
    dgrad_a.push_back({n, F, H, at(dye, offset_of(dtype, r0 * H)),
                       at(w_out, offset_of(dtype, l * F * H)), at(da, offset_of(dtype, r0 * F))});
    dgrad_x.push_back({n, H, 2 * F, at(dh, offset_of(dtype, r0 * 2 * F)),
                       at(w_in, offset_of(dtype, l * H * 2 * F)),
                       at(dxe, offset_of(dtype, r0 * H))});
  }
  gemm.grouped(false, true, dgrad_a, false, dtype, dtype, stream);
  swiglu_bwd(da, h, off[E_local], F, dtype, dh, stream);
  gemm.grouped(false, true, dgrad_x, false, dtype, dtype, stream);
}

void expert_ffn_bwd_weights(const void* dye, const void* xe, const void* a, const void* dh,
                            const int64_t* off, int64_t E_local, int64_t H, int64_t F, DType dtype,
                            DType grad_dtype, void* dw_in, void* dw_out, GemmRunner& gemm,
                            ExpertGemmLists& lists, cudaStream_t stream) {
  auto& wgrad_out = reuse(lists.first);
  auto& wgrad_in = reuse(lists.second);
  for (int64_t l = 0; l < E_local; ++l) {
    const int64_t r0 = off[l], n = off[l + 1] - off[l];
    // Every expert: one with no rows gets zeros (K = 0).
    wgrad_out.push_back({F, H, n, at(a, offset_of(dtype, r0 * F)),
                         at(dye, offset_of(dtype, r0 * H)),
                         at(dw_out, offset_of(grad_dtype, l * F * H))});
    wgrad_in.push_back({H, 2 * F, n, at(xe, offset_of(dtype, r0 * H)),
                        at(dh, offset_of(dtype, r0 * 2 * F)),
                        at(dw_in, offset_of(grad_dtype, l * H * 2 * F))});
  }
  gemm.grouped(true, false, wgrad_out, false, dtype, grad_dtype, stream);
  gemm.grouped(true, false, wgrad_in, false, dtype, grad_dtype, stream);
}

}  // namespace moe::cuda
