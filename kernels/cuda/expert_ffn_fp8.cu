#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/expert_ffn.h"
#include "kernels/cuda/expert_ffn_fp8.h"
#include "kernels/cuda/fp8_quantize.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/storage.cuh"

namespace moe::cuda {
namespace {

constexpr int64_t kB = kFp8Block;

int64_t blocks_of(int64_t n) { return (n + kB - 1) / kB; }
// The row stride of a weight gradient's transposed operands: FP8 rows start 16-byte aligned.
int64_t transposed_ld(int64_t rows_bound) { return (rows_bound + 15) / 16 * 16; }
char* at(void* p, size_t bytes) { return static_cast<char*>(p) + bytes; }

void require_host_offsets(const ExpertOffsets& rows) {
  MOE_USER_CHECK(rows.host,
                 "the FP8 expert GEMMs run one cuBLASLt call per expert and need the "
                 "row counts on the host, which a sync-free step (graph: true) never "
                 "copies there: set graph=false");
}

// C [R, N] bf16 = each expert's rows of X [R, K] (bf16) times its weight W[g] [P, Q] (bf16), used
// as B [N, K] = W[g] (transpose false: N = P, K = Q) or W[g]^T (true: N = Q, K = P).
void rows_times_weight_fp8(const void* X, const void* W, int64_t P, int64_t Q, bool transpose,
                           const ExpertOffsets& rows, int64_t G, Fp8Recipe recipe, void* C,
                           GemmRunner& gemm, const Fp8Scratch& sc, cudaStream_t stream) {
  require_host_offsets(rows);
  const int64_t N = transpose ? Q : P, K = transpose ? P : Q;
  const bool tensor = recipe == Fp8Recipe::kTensor;
  quantize_rows_fp8(X, rows.device, G, rows.rows_bound, K, recipe, sc.a, sc.a_scales, stream);
  quantize_weight_fp8(W, G, P, Q, transpose, recipe, sc.b, sc.b_scales, stream);
  const int64_t w_stride = weight_fp8_scale_stride(P, Q);
  std::vector<Fp8Problem> problems;
  problems.reserve(size_t(G));
  for (int64_t g = 0; g < G; ++g) {
    const int64_t r0 = rows.host[g], n = rows.host[g + 1] - r0;
    if (n == 0) continue;
    const float* a_scales = sc.a_scales + (tensor ? kTensorScaleStride * g : blocks_of(K) * r0);
    const float* b_scales = sc.b_scales + (tensor ? kTensorScaleStride * g : g * w_stride);
    problems.push_back({n,
                        N,
                        K,
                        {sc.a + r0 * K, K, a_scales},
                        {sc.b + g * P * Q, K, b_scales},
                        at(C, size_t(r0 * N) * 2)});
  }
  gemm.grouped_fp8(problems, tensor ? Fp8Scaling::kTensor : Fp8Scaling::kRowsTimesTiles, false,
                   DType::kBf16, stream);
}

// C[g] [M, N] (grad_dtype) = X1's rows of expert g ([n, M])^T times X2's ([n, N]): each operand
// transposed to K-major by the quantization, 128 x 1 blocks down the rows.
void rows_t_times_rows_fp8(const void* X1, const void* X2, int64_t M, int64_t N,
                           const ExpertOffsets& rows, int64_t G, Fp8Recipe recipe, void* C,
                           DType grad_dtype, bool accumulate, GemmRunner& gemm,
                           const Fp8Scratch& sc, cudaStream_t stream) {
  require_host_offsets(rows);
  const bool tensor = recipe == Fp8Recipe::kTensor;
  const int64_t ld = transposed_ld(rows.rows_bound);
  quantize_cols_fp8(X1, rows.device, G, rows.rows_bound, M, recipe, sc.a, ld, sc.a_scales, stream);
  quantize_cols_fp8(X2, rows.device, G, rows.rows_bound, N, recipe, sc.b, ld, sc.b_scales, stream);
  std::vector<Fp8Problem> problems;
  problems.reserve(size_t(G));
  int64_t before = 0;  // 128-row blocks of the experts before g
  for (int64_t g = 0; g < G; ++g) {
    const int64_t r0 = rows.host[g], n = rows.host[g + 1] - r0;
    MOE_CHECK(r0 % 16 == 0, "FP8 weight gradients: expert " << g << "'s rows start at " << r0
                                                            << ", not a multiple of 16");
    const float* a_scales = sc.a_scales + (tensor ? kTensorScaleStride * g : M * before);
    const float* b_scales = sc.b_scales + (tensor ? kTensorScaleStride * g : N * before);
    problems.push_back({M,
                        N,
                        n,
                        {sc.a + r0, ld, a_scales},
                        {sc.b + r0, ld, b_scales},
                        at(C, size_t(g * M * N) * stored_bytes(grad_dtype))});
    before += blocks_of(n);
  }
  gemm.grouped_fp8(problems, tensor ? Fp8Scaling::kTensor : Fp8Scaling::kRowsTimesRows, accumulate,
                   grad_dtype, stream);
}

}  // namespace

Fp8ScratchBytes fp8_scratch_bytes(int64_t rows_bound, int64_t E_local, int64_t H, int64_t F) {
  const int64_t widest = std::max(H, 2 * F);
  const int64_t ld = transposed_ld(rows_bound);
  const int64_t weights = E_local * H * 2 * F;
  const int64_t cols_scales = cols_fp8_scale_bound(E_local, ld, widest);
  const int64_t w_scales =
      E_local * std::max(weight_fp8_scale_stride(H, 2 * F), weight_fp8_scale_stride(F, H));
  Fp8ScratchBytes b;
  b.a = size_t(ld * widest);
  b.b = size_t(std::max(ld * widest, weights));
  const int64_t tensor_scales = kTensorScaleStride * E_local;
  b.a_scales = size_t(std::max({blocks_of(widest) * rows_bound, cols_scales, tensor_scales})) * 4;
  b.b_scales = size_t(std::max({w_scales, cols_scales, tensor_scales})) * 4;
  return b;
}

void expert_ffn_fwd_fp8(const void* xe, const void* w_in, const void* w_out,
                        const ExpertOffsets& rows, int64_t E_local, int64_t H, int64_t F,
                        Fp8Recipe recipe, void* h, void* a, void* ye, GemmRunner& gemm,
                        const Fp8Scratch& scratch, cudaStream_t stream) {
  // h = xe @ w_in: B = w_in^T [2F, H]; ye = a @ w_out: B = w_out^T [H, F].
  rows_times_weight_fp8(xe, w_in, H, 2 * F, true, rows, E_local, recipe, h, gemm, scratch, stream);
  swiglu_fwd(h, rows.device + E_local, rows.rows_bound, F, DType::kBf16, a, stream);
  rows_times_weight_fp8(a, w_out, F, H, true, rows, E_local, recipe, ye, gemm, scratch, stream);
}

void expert_ffn_bwd_data_fp8(const void* dye, const void* h, const void* w_in, const void* w_out,
                             const ExpertOffsets& rows, int64_t E_local, int64_t H, int64_t F,
                             Fp8Recipe recipe, void* da, void* dh, void* dxe, GemmRunner& gemm,
                             const Fp8Scratch& scratch, cudaStream_t stream) {
  // da = dye @ w_out^T: B = w_out [F, H] as stored; dxe = dh @ w_in^T: B = w_in [H, 2F].
  rows_times_weight_fp8(dye, w_out, F, H, false, rows, E_local, recipe, da, gemm, scratch, stream);
  swiglu_bwd(da, h, rows.device + E_local, rows.rows_bound, F, DType::kBf16, dh, stream);
  rows_times_weight_fp8(dh, w_in, H, 2 * F, false, rows, E_local, recipe, dxe, gemm, scratch,
                        stream);
}

void expert_ffn_bwd_weights_fp8(const void* dye, const void* xe, const void* a, const void* dh,
                                const ExpertOffsets& rows, int64_t E_local, int64_t H, int64_t F,
                                Fp8Recipe recipe, DType grad_dtype, void* dw_in, void* dw_out,
                                bool accumulate, GemmRunner& gemm, const Fp8Scratch& scratch,
                                cudaStream_t stream) {
  rows_t_times_rows_fp8(a, dye, F, H, rows, E_local, recipe, dw_out, grad_dtype, accumulate, gemm,
                        scratch, stream);
  rows_t_times_rows_fp8(xe, dh, H, 2 * F, rows, E_local, recipe, dw_in, grad_dtype, accumulate,
                        gemm, scratch, stream);
}

}  // namespace moe::cuda
