#include <cuda_bf16.h>

#include <cstdint>

#include "core/error.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/router_grads.h"

namespace moe::cuda {
namespace {

// Three bf16 terms per copy: (hi, mid, lo) of v, or v three times (w_gate's copies).
constexpr int kTerms = kRouterGradTerms;

__global__ void split_bf16x3_kernel(const float* src, int64_t rows, int64_t cols,
                                    __nv_bfloat16* dst) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const float v = src[i];
    const __nv_bfloat16 hi = __float2bfloat16_rn(v);
    const float rest = v - __bfloat162float(hi);
    const __nv_bfloat16 mid = __float2bfloat16_rn(rest);
    const __nv_bfloat16 lo = __float2bfloat16_rn(rest - __bfloat162float(mid));
    __nv_bfloat16* row = dst + r * kTerms * cols + c;
    row[0] = hi;
    row[cols] = mid;
    row[2 * cols] = lo;
  }
}

// dst [rows, 3 cols] = [src | src | src], src [rows, cols] bf16.
__global__ void repeat_cols_kernel(const __nv_bfloat16* src, int64_t rows, int64_t cols,
                                   __nv_bfloat16* dst) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const __nv_bfloat16 v = src[i];
    __nv_bfloat16* row = dst + r * kTerms * cols + c;
    row[0] = v;
    row[cols] = v;
    row[2 * cols] = v;
  }
}

// dst [rows, cols] = the sum of src's three column blocks [rows, 3 cols], in term order.
__global__ void sum_terms_kernel(const float* src, int64_t rows, int64_t cols, float* dst) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const float* row = src + r * kTerms * cols + c;
    dst[i] = (row[0] + row[cols]) + row[2 * cols];
  }
}

}  // namespace

void split_bf16x3(const float* src, int64_t rows, int64_t cols, void* dst, cudaStream_t stream) {
  if (rows * cols == 0) return;
  split_bf16x3_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(
      src, rows, cols, static_cast<__nv_bfloat16*>(dst));
  CUDA_CHECK(cudaGetLastError());
}

void router_grads(GemmRunner& gemm, const float* dlogits, const void* x, const void* w_gate,
                  int64_t T, int64_t H, int64_t E, DType dtype, float* dx_acc, float* dw_gate,
                  void* scratch, cudaStream_t stream) {
  if (dtype == DType::kFp32) {
    gemm.gemm(false, true, T, H, E, dlogits, w_gate, dx_acc, true, DType::kFp32, DType::kFp32,
              stream);
    gemm.gemm(true, false, H, E, T, x, dlogits, dw_gate, false, DType::kFp32, DType::kFp32, stream);
    return;
  }
  MOE_CHECK(dtype == DType::kBf16 && scratch, "router_grads: bf16 storage needs its scratch");
  const RouterGradsScratch p = router_grads_scratch(T, H, E);
  auto* base = static_cast<uint8_t*>(scratch);
  void* terms = base;
  auto* w_copies = reinterpret_cast<__nv_bfloat16*>(base + p.terms);
  auto* dw_terms = reinterpret_cast<float*>(base + p.terms + p.w_copies);
  split_bf16x3(dlogits, T, E, terms, stream);
  if (H * E > 0) {
    repeat_cols_kernel<<<blocks_for(H * E), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(w_gate), H, E, w_copies);
    CUDA_CHECK(cudaGetLastError());
  }
  const int64_t K3 = kTerms * E;
  gemm.gemm(false, true, T, H, K3, terms, w_copies, dx_acc, true, DType::kBf16, DType::kFp32,
            stream);
  gemm.gemm(true, false, H, K3, T, x, terms, dw_terms, false, DType::kBf16, DType::kFp32, stream);
  if (H * E > 0) {
    sum_terms_kernel<<<blocks_for(H * E), kThreads, 0, stream>>>(dw_terms, H, E, dw_gate);
    CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace moe::cuda
