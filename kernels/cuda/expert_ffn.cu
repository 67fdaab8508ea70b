#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/expert_ffn.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/storage.cuh"
#include "kernels/cuda/swiglu.cuh"

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
// A thread takes N consecutive elements of a row of a (N divides F; see the combine kernels):
// those at flat index i of a [n, F]. Each returns the largest |value| it stored, as stored.
__device__ __forceinline__ float stored_abs(const float*, float v) { return fabsf(v); }
__device__ __forceinline__ float stored_abs(const __nv_bfloat16*, float v) {
  return fabsf(__bfloat162float(__float2bfloat16_rn(v)));
}

template <class T, int N>
__device__ __forceinline__ float swiglu_fwd_at(const T* h, int64_t F, T* a, int64_t i) {
  const int64_t r = i / F, j = i % F;
  float g[N], u[N], out[N];
  load_n<N>(h + r * 2 * F + j, g);
  load_n<N>(h + r * 2 * F + F + j, u);
  float m = 0.0f;
#pragma unroll
  for (int e = 0; e < N; ++e) {
    out[e] = swiglu_value(g[e], u[e]);
    m = fmaxf(m, stored_abs(a, out[e]));
  }
  store_n<N>(a + i, out);
  return m;
}

template <class T, int N>
__device__ __forceinline__ float swiglu_bwd_at(const T* da, const T* h, int64_t F, T* dh,
                                               int64_t i) {
  const int64_t r = i / F, j = i % F;
  float g[N], u[N], d[N], dg[N], du[N];
  load_n<N>(h + r * 2 * F + j, g);
  load_n<N>(h + r * 2 * F + F + j, u);
  load_n<N>(da + i, d);
  float m = 0.0f;
#pragma unroll
  for (int e = 0; e < N; ++e) {
    swiglu_grads(d[e], g[e], u[e], dg[e], du[e]);
    m = fmaxf(m, fmaxf(stored_abs(dh, dg[e]), stored_abs(dh, du[e])));
  }
  store_n<N>(dh + r * 2 * F + j, dg);
  store_n<N>(dh + r * 2 * F + F + j, du);
  return m;
}

// at(i) for every N-element step i of [0, n * F) (n = *n_dev), grid-stride.
template <int N, class At>
__device__ __forceinline__ void each_step(const int64_t* n_dev, int64_t F, At at) {
  const int64_t n = *n_dev;
  for (int64_t i = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * N; i < n * F;
       i += int64_t(gridDim.x) * blockDim.x * N)
    at(i);
}

// The same, each block taking a contiguous range of steps, with each expert's largest |value|
// max-ed into amax: a block reduction and one atomic per block and expert it meets, not one a
// thread. A maximum does not depend on the order its parts arrive in.
template <int N, class At>
__device__ __forceinline__ void each_step_with_amax(const int64_t* n_dev, int64_t F,
                                                    const GroupAmax& amax, At at) {
  const int64_t per_row = F / N, steps = *n_dev * per_row;
  const int64_t per_block = (steps + gridDim.x - 1) / gridDim.x;
  int64_t s = blockIdx.x * per_block;
  const int64_t end = min(steps, s + per_block);
  if (s >= end) return;  // the same for the whole block
  int64_t g = last_at_or_below(amax.offsets, amax.G, s / per_row);
  while (s < end) {  // one expert's part of the range a round, the same for the whole block
    const int64_t part_end = min(end, amax.offsets[g + 1] * per_row);
    float m = 0.0f;
    for (int64_t k = s + threadIdx.x; k < part_end; k += blockDim.x) m = fmaxf(m, at(k * N));
    m = block_max(m);
    if (threadIdx.x == 0 && m > 0.0f) atomicMax(&amax.bits[amax.stride * g], __float_as_uint(m));
    s = max(s, part_end);
    ++g;
  }
}

template <class T, int N>
__global__ void swiglu_fwd_kernel(const T* h, const int64_t* n_dev, int64_t F, T* a,
                                  GroupAmax amax) {
  auto at = [&](int64_t i) { return swiglu_fwd_at<T, N>(h, F, a, i); };
  if (amax.bits)
    each_step_with_amax<N>(n_dev, F, amax, at);
  else
    each_step<N>(n_dev, F, at);
}

template <class T, int N>
__global__ void swiglu_bwd_kernel(const T* da, const T* h, const int64_t* n_dev, int64_t F, T* dh,
                                  GroupAmax amax) {
  auto at = [&](int64_t i) { return swiglu_bwd_at<T, N>(da, h, F, dh, i); };
  if (amax.bits)
    each_step_with_amax<N>(n_dev, F, amax, at);
  else
    each_step<N>(n_dev, F, at);
}

// With an amax, a few blocks per SM, each over a long range, so that the atomics stay few.
int swiglu_grid(int64_t steps, const GroupAmax& amax) {
  return amax.bits ? std::min(blocks_for(steps), 2048) : blocks_for(steps);
}

}  // namespace

void swiglu_fwd(const void* h, const int64_t* n_dev, int64_t n_bound, int64_t F, DType dtype,
                void* a, cudaStream_t stream, const GroupAmax& amax) {
  if (n_bound * F == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    // Rows of F (a) and 2F (h) elements: F in whole packs makes both whole.
    const int pack = rows_take_pack16<S>(F, {h, a}) ? kPack16<S> : 1;
    auto* k = pack > 1 ? swiglu_fwd_kernel<S, kPack16<S>> : swiglu_fwd_kernel<S, 1>;
    k<<<swiglu_grid(n_bound * F / pack, amax), kThreads, 0, stream>>>(
        static_cast<const S*>(h), n_dev, F, static_cast<S*>(a), amax);
  });
  CUDA_CHECK(cudaGetLastError());
}

void swiglu_bwd(const void* da, const void* h, const int64_t* n_dev, int64_t n_bound, int64_t F,
                DType dtype, void* dh, cudaStream_t stream, const GroupAmax& amax) {
  if (n_bound * F == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    const int pack = rows_take_pack16<S>(F, {da, h, dh}) ? kPack16<S> : 1;
    auto* k = pack > 1 ? swiglu_bwd_kernel<S, kPack16<S>> : swiglu_bwd_kernel<S, 1>;
    k<<<swiglu_grid(n_bound * F / pack, amax), kThreads, 0, stream>>>(
        static_cast<const S*>(da), static_cast<const S*>(h), n_dev, F, static_cast<S*>(dh), amax);
  });
  CUDA_CHECK(cudaGetLastError());
}

// ---- the expert FFN ----

// The grouped sm90 kernel where the runner's method asks for it and the kernel takes the shape,
// else a problem per expert (per expert with rows; every expert in the weight gradients, where no
// rows give zeros) through the runner's grouped().
void experts_gemm(GroupedLayout layout, const ExpertOffsets& rows, int64_t E_local, int64_t M,
                  int64_t N, int64_t K, const void* A, const void* B, void* C, DType in, DType out,
                  GemmRunner& gemm, std::vector<GemmProblem>& list, cudaStream_t stream,
                  bool accumulate) {
  const GroupedGemmShape shape{layout, E_local, rows.rows_bound, M, N, K};
  const GroupedEpilogue epi = accumulate ? GroupedEpilogue::kAdd : GroupedEpilogue::kStore;
  if (gemm.grouped_sm90(shape, rows.device, A, B, C, in, out, stream, epi)) return;
  MOE_USER_CHECK(rows.host, "the expert GEMMs' method ("
                                << gemm_method_name(gemm.method())
                                << ") needs the row counts on the host, which a sync-free step "
                                   "(graph: true) never copies there: set gemm.method to "
                                   "grouped_sm90 on an H100 or H200 with a bf16 workload (its "
                                   "log line says why a shape falls back), or graph to false");
  auto& problems = reuse(list);
  const bool rows_k = layout == GroupedLayout::kRowsTTimesRows;
  for (int64_t l = 0; l < E_local; ++l) {
    const int64_t r0 = rows.host[l], n = rows.host[l + 1] - r0;
    if (rows_k) {
      problems.push_back({M, N, n, at(A, offset_of(in, r0 * M)), at(B, offset_of(in, r0 * N)),
                          at(C, offset_of(out, l * M * N))});
    } else if (n > 0) {
      problems.push_back({n, N, K, at(A, offset_of(in, r0 * K)), at(B, offset_of(in, l * K * N)),
                          at(C, offset_of(out, r0 * N))});
    }
  }
  gemm.grouped(rows_k, layout == GroupedLayout::kRowsTimesWeightT, problems, accumulate, in, out,
               stream);
}

void expert_ffn_fwd(const void* xe, const void* w_in, const void* w_out, const ExpertOffsets& rows,
                    int64_t E_local, int64_t H, int64_t F, DType dtype, void* h, void* a, void* ye,
                    GemmRunner& gemm, ExpertGemmLists& lists, cudaStream_t stream) {
  const auto L = GroupedLayout::kRowsTimesWeight;
  {
    ExpertGemmScope scope(gemm, ExpertGemm::kUp, stream);
    // With gemm.sm90_fuse_swiglu, SwiGLU runs in the up projection's epilogue where it can.
    const GroupedGemmShape up{L, E_local, rows.rows_bound, 0, 2 * F, H};
    if (!gemm.grouped_sm90(up, rows.device, xe, w_in, h, dtype, dtype, stream,
                           GroupedEpilogue::kSwiGLU, a)) {
      experts_gemm(L, rows, E_local, 0, 2 * F, H, xe, w_in, h, dtype, dtype, gemm, lists.first,
                   stream);
      swiglu_fwd(h, rows.device + E_local, rows.rows_bound, F, dtype, a, stream);
    }
  }
  ExpertGemmScope scope(gemm, ExpertGemm::kDown, stream);
  experts_gemm(L, rows, E_local, 0, H, F, a, w_out, ye, dtype, dtype, gemm, lists.second, stream);
}

void expert_ffn_bwd_data(const void* dye, const void* h, const void* w_in, const void* w_out,
                         const ExpertOffsets& rows, int64_t E_local, int64_t H, int64_t F,
                         DType dtype, void* da, void* dh, void* dxe, GemmRunner& gemm,
                         ExpertGemmLists& lists, cudaStream_t stream) {
  const auto L = GroupedLayout::kRowsTimesWeightT;
  {
    ExpertGemmScope scope(gemm, ExpertGemm::kDgradA, stream);
    // With gemm.sm90_fuse_swiglu, SwiGLU's backward runs in da's epilogue; da is not stored.
    const GroupedGemmShape dgrad_a{L, E_local, rows.rows_bound, 0, F, H};
    if (!gemm.grouped_sm90(dgrad_a, rows.device, dye, w_out, dh, dtype, dtype, stream,
                           GroupedEpilogue::kSwiGLUBackward, const_cast<void*>(h))) {
      experts_gemm(L, rows, E_local, 0, F, H, dye, w_out, da, dtype, dtype, gemm, lists.first,
                   stream);
      swiglu_bwd(da, h, rows.device + E_local, rows.rows_bound, F, dtype, dh, stream);
    }
  }
  ExpertGemmScope scope(gemm, ExpertGemm::kDgradX, stream);
  experts_gemm(L, rows, E_local, 0, H, 2 * F, dh, w_in, dxe, dtype, dtype, gemm, lists.second,
               stream);
}

void expert_ffn_bwd_weights(const void* dye, const void* xe, const void* a, const void* dh,
                            const ExpertOffsets& rows, int64_t E_local, int64_t H, int64_t F,
                            DType dtype, DType grad_dtype, void* dw_in, void* dw_out,
                            bool accumulate, GemmRunner& gemm, ExpertGemmLists& lists,
                            cudaStream_t stream) {
  const auto L = GroupedLayout::kRowsTTimesRows;
  {
    ExpertGemmScope scope(gemm, ExpertGemm::kWgradOut, stream);
    experts_gemm(L, rows, E_local, F, H, 0, a, dye, dw_out, dtype, grad_dtype, gemm, lists.first,
                 stream, accumulate);
  }
  ExpertGemmScope scope(gemm, ExpertGemm::kWgradIn, stream);
  experts_gemm(L, rows, E_local, H, 2 * F, 0, xe, dh, dw_in, dtype, grad_dtype, gemm, lists.second,
               stream, accumulate);
}

}  // namespace moe::cuda
