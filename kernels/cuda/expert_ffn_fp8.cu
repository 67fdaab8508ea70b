#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/fp8_scales.h"
#include "kernels/cuda/expert_ffn.h"
#include "kernels/cuda/expert_ffn_fp8.h"
#include "kernels/cuda/fp8_quantize.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/storage.cuh"

namespace moe::cuda {
namespace {

constexpr int64_t kB = kFp8Block;

int64_t blocks_of(int64_t n) { return (n + kB - 1) / kB; }
char* at(void* p, size_t bytes) { return static_cast<char*>(p) + bytes; }

// cuBLASLt's per-expert calls, where the grouped kernel did not take a GEMM.
void require_host_offsets(const ExpertOffsets& rows) {
  MOE_USER_CHECK(rows.host,
                 "an FP8 expert GEMM the grouped sm90 kernel did not take runs one cuBLASLt "
                 "call per expert and needs the row counts on the host, which a sync-free "
                 "step (graph: true) never copies there: set graph=false");
}

// dispatch_dtype fp8's packed rows carry 1 x 128 scales: fp8_block's only (validation refuses
// the rest).
void require_block_recipe(Fp8Recipe recipe) {
  MOE_CHECK(recipe == Fp8Recipe::kBlock, "FP8 dispatched rows carry 1 x 128 scales (fp8_block)");
}

// One expert's share of a quantized weight [G, P, Q]'s scales (all of them: weight_fp8_scales).
int64_t scales_per_expert(int64_t P, int64_t Q, Fp8Recipe recipe) {
  return recipe == Fp8Recipe::kTensor ? kTensorScaleStride : weight_fp8_scale_stride(P, Q);
}

Fp8Weight weight_from(const Fp8Weight& w, int64_t first, int64_t P, int64_t Q, Fp8Recipe recipe) {
  const int64_t codes = first * P * Q, scales = first * scales_per_expert(P, Q, recipe);
  return {w.stored + codes, w.stored_scales + scales, w.transposed + codes,
          w.transposed_scales + scales};
}

// The six GEMMs: C [R, N] = X [R, K] times a weight as B [N, K] (rows), or C[g] [M, N] = X[g]^T
// X2[g] (a weight gradient, reduced over each expert's rows).
struct GemmShape {
  bool wgrad;
  int64_t M, N, K;
};
GemmShape shape_of(ExpertGemm which, int64_t H, int64_t F) {
  switch (which) {
    case ExpertGemm::kUp:
      return {false, 0, 2 * F, H};  // h = xe @ w_in: B = w_in^T [2F, H]
    case ExpertGemm::kDown:
      return {false, 0, H, F};  // ye = a @ w_out: B = w_out^T [H, F]
    case ExpertGemm::kDgradA:
      return {false, 0, F, H};  // da = dye @ w_out^T: B = w_out [F, H]
    case ExpertGemm::kDgradX:
      return {false, 0, H, 2 * F};  // dxe = dh @ w_in^T: B = w_in [H, 2F]
    case ExpertGemm::kWgradOut:
      return {true, F, H, 0};  // dw_out = a^T dye
    case ExpertGemm::kWgradIn:
      return {true, H, 2 * F, 0};  // dw_in = xe^T dh
  }
  MOE_CHECK(false, "FP8 GEMM " << int(which) << " is none of the six");
  return {};
}

}  // namespace

Fp8Weights quantize_ffn_weights_fp8(const void* w_in, const void* w_out, int64_t G, int64_t H,
                                    int64_t F, Fp8Recipe recipe, void* base, cudaStream_t stream) {
  const Fp8WeightsLayout layout = fp8_weights_layout(G, H, F);
  auto quantize = [&](const void* W, const Fp8WeightPieces& piece, int64_t P, int64_t Q) {
    auto* q = reinterpret_cast<uint8_t*>(at(base, piece.stored));
    auto* qt = reinterpret_cast<uint8_t*>(at(base, piece.transposed));
    auto* s = reinterpret_cast<float*>(at(base, piece.stored_scales));
    auto* st = reinterpret_cast<float*>(at(base, piece.transposed_scales));
    quantize_weight_fp8(W, G, P, Q, recipe, q, s, qt, st, stream);
    return Fp8Weight{q, s, qt, st};
  };
  return {quantize(w_in, layout.in, H, 2 * F), quantize(w_out, layout.out, F, H)};
}

Fp8Weights fp8_weights_from(const Fp8Weights& w, int64_t first, int64_t H, int64_t F,
                            Fp8Recipe recipe) {
  return {weight_from(w.in, first, H, 2 * F, recipe), weight_from(w.out, first, F, H, recipe)};
}

void quantize_fp8_gemm_operands(ExpertGemm which, const void* X, const ExpertOffsets& rows,
                                int64_t G, int64_t H, int64_t F, Fp8Recipe recipe,
                                const Fp8Scratch& sc, cudaStream_t stream, bool amax_ready,
                                const Fp8Transposed& keep_t) {
  const GemmShape s = shape_of(which, H, F);
  const int64_t ld = fp8_transposed_ld(rows.rows_bound);
  MOE_CHECK(!amax_ready || !s.wgrad, "FP8: a weight gradient's operand comes with no amax");
  if (s.wgrad) {
    quantize_cols_fp8(X, rows.device, G, rows.rows_bound, s.M, recipe, sc.a, ld, sc.a_scales,
                      stream);
    return;
  }
  // A data gradient's operand is also a weight gradient's second one, and xe (up) and a (down)
  // the first ones of wgrad_in's and wgrad_out's where asked: both ways in one read.
  MOE_CHECK(!keep_t.codes || which == ExpertGemm::kUp || which == ExpertGemm::kDown,
            "FP8: only xe's and a's transposed codes are kept");
  uint8_t* qt = which == ExpertGemm::kDgradA   ? sc.dy_t
                : which == ExpertGemm::kDgradX ? sc.dh_t
                                               : keep_t.codes;
  float* qt_scales = which == ExpertGemm::kDgradA   ? sc.dy_t_scales
                     : which == ExpertGemm::kDgradX ? sc.dh_t_scales
                                                    : keep_t.scales;
  quantize_rows_and_cols_fp8(X, rows.device, G, rows.rows_bound, s.K, recipe, sc.a, sc.a_scales, qt,
                             ld, qt ? qt_scales : nullptr, stream, amax_ready);
}

GroupAmax amax_into_scales(const ExpertOffsets& rows, int64_t G, Fp8Recipe recipe,
                           const Fp8Scratch& sc, cudaStream_t stream) {
  if (recipe != Fp8Recipe::kTensor) return {};
  CUDA_CHECK(
      cudaMemsetAsync(sc.a_scales, 0, size_t(kTensorScaleStride * G) * sizeof(float), stream));
  return {rows.device, G, reinterpret_cast<unsigned*>(sc.a_scales), kTensorScaleStride};
}

void run_fp8_gemm(ExpertGemm which, const Fp8Weights& w, const ExpertOffsets& rows, int64_t G,
                  int64_t H, int64_t F, Fp8Recipe recipe, DType grad_dtype, bool accumulate,
                  void* C, GemmRunner& gemm, const Fp8Scratch& sc, cudaStream_t stream) {
  ExpertGemmScope scope(gemm, which, stream);
  const GemmShape s = shape_of(which, H, F);
  const bool tensor = recipe == Fp8Recipe::kTensor;
  const Fp8Scaling scaling = tensor    ? Fp8Scaling::kTensor
                             : s.wgrad ? Fp8Scaling::kRowsTimesRows
                                       : Fp8Scaling::kRowsTimesTiles;
  std::vector<Fp8Problem> problems;
  problems.reserve(size_t(G));
  if (!s.wgrad) {
    // B: the weight as stored where the GEMM multiplies by its transpose, else transposed.
    const bool stored = which == ExpertGemm::kDgradA || which == ExpertGemm::kDgradX;
    const Fp8Weight& wt = which == ExpertGemm::kUp || which == ExpertGemm::kDgradX ? w.in : w.out;
    const uint8_t* B = stored ? wt.stored : wt.transposed;
    const float* B_scales = stored ? wt.stored_scales : wt.transposed_scales;
    const int64_t per = scales_per_expert(s.N, s.K, recipe);
    // All experts in one launch of the grouped kernel, where the method and the kernel take it.
    const GroupedGemmShape gs{GroupedLayout::kRowsTimesWeightT, G, rows.rows_bound, 0, s.N, s.K};
    const GroupedFp8Scales scales =
        tensor ? GroupedFp8Scales{sc.a_scales, B_scales, kTensorScaleStride}
               : GroupedFp8Scales{sc.a_scales, B_scales, per, true, weight_fp8_tiles_ld(s.K)};
    if (gemm.grouped_sm90_fp8(gs, rows.device, sc.a, B, scales, C, DType::kBf16, stream)) return;
    require_host_offsets(rows);
    for (int64_t g = 0; g < G; ++g) {
      const int64_t r0 = rows.host[g], n = rows.host[g + 1] - r0;
      if (n == 0) continue;
      const float* a_scales = sc.a_scales + (tensor ? kTensorScaleStride * g : blocks_of(s.K) * r0);
      problems.push_back({n,
                          s.N,
                          s.K,
                          {sc.a + r0 * s.K, s.K, a_scales},
                          {B + g * s.N * s.K, s.K, B_scales + g * per},
                          at(C, size_t(r0 * s.N) * 2)});
    }
    gemm.grouped_fp8(problems, scaling, false, DType::kBf16, stream);
    return;
  }
  const int64_t ld = fp8_transposed_ld(rows.rows_bound), M = s.M, N = s.N;
  // The second operand, dye's or dh's, transposed by the data gradient before.
  const uint8_t* B = which == ExpertGemm::kWgradOut ? sc.dy_t : sc.dh_t;
  const float* B_scales = which == ExpertGemm::kWgradOut ? sc.dy_t_scales : sc.dh_t_scales;
  // Both paths read each expert's K (its rows) from 16-byte aligned addresses of the transposed
  // codes (a TMA box starting elsewhere faults): align 16 gives that (the backend refuses FP8
  // without it); checked where the offsets are on the host.
  for (int64_t g = 0; rows.host && g < G; ++g)
    MOE_CHECK(rows.host[g] % 16 == 0, "FP8 weight gradients: expert " << g << "'s rows start at "
                                                                      << rows.host[g]
                                                                      << ", not a multiple of 16");
  // All experts in one launch, K-major on the transposed codes (rows [offsets[g], offsets[g+1])
  // of each row of them are expert g's K), adding into C with accumulate.
  const GroupedGemmShape gs{GroupedLayout::kRowsTTimesRows, G, ld, M, N, 0};
  if (gemm.grouped_sm90_fp8(gs, rows.device, sc.a, B,
                            {sc.a_scales, B_scales, kTensorScaleStride, !tensor}, C, grad_dtype,
                            stream, accumulate ? GroupedEpilogue::kAdd : GroupedEpilogue::kStore))
    return;
  require_host_offsets(rows);
  int64_t before = 0;  // 128-row blocks of the experts before g
  for (int64_t g = 0; g < G; ++g) {
    const int64_t r0 = rows.host[g], n = rows.host[g + 1] - r0;
    const float* a_scales = sc.a_scales + (tensor ? kTensorScaleStride * g : M * before);
    const float* b_scales = B_scales + (tensor ? kTensorScaleStride * g : N * before);
    problems.push_back({M,
                        N,
                        n,
                        {sc.a + r0, ld, a_scales},
                        {B + r0, ld, b_scales},
                        at(C, size_t(g * M * N) * stored_bytes(grad_dtype))});
    before += blocks_of(n);
  }
  gemm.grouped_fp8(problems, scaling, accumulate, grad_dtype, stream);
}

void report_tensor_scales(const float* scales, int64_t E_local, float* to, cudaStream_t stream) {
  CUDA_CHECK(cudaMemcpy2DAsync(to, sizeof(float), scales, kTensorScaleStride * sizeof(float),
                               sizeof(float), size_t(E_local), cudaMemcpyDeviceToDevice, stream));
}

void expert_ffn_fwd_fp8(const void* xe, const Fp8Weights& w, const ExpertOffsets& rows,
                        int64_t E_local, int64_t H, int64_t F, Fp8Recipe recipe, void* h, void* a,
                        void* ye, GemmRunner& gemm, const Fp8Scratch& sc, cudaStream_t stream,
                        bool xe_packed, const Fp8Kept& keep, float* report) {
  if (xe_packed) {
    require_block_recipe(recipe);
    MOE_CHECK(!keep.xe_t.codes, "FP8: packed rows' transposed codes are not kept");
    fp8_rows_to_gemm(xe, rows.device, E_local, rows.rows_bound, H, sc.a, sc.a_scales, stream);
  } else {
    quantize_fp8_gemm_operands(ExpertGemm::kUp, xe, rows, E_local, H, F, recipe, sc, stream, false,
                               keep.xe_t);
  }
  run_fp8_gemm(ExpertGemm::kUp, w, rows, E_local, H, F, recipe, DType::kBf16, false, h, gemm, sc,
               stream);
  const GroupAmax a_amax = amax_into_scales(rows, E_local, recipe, sc, stream);
  swiglu_fwd(h, rows.device + E_local, rows.rows_bound, F, DType::kBf16, a, stream, a_amax);
  quantize_fp8_gemm_operands(ExpertGemm::kDown, a, rows, E_local, H, F, recipe, sc, stream,
                             a_amax.bits != nullptr, keep.a_t);
  if (report && recipe == Fp8Recipe::kTensor)
    report_tensor_scales(sc.a_scales, E_local, report + int64_t(Fp8Computed::kA) * E_local, stream);
  run_fp8_gemm(ExpertGemm::kDown, w, rows, E_local, H, F, recipe, DType::kBf16, false, ye, gemm, sc,
               stream);
}

void expert_ffn_bwd_data_fp8(const void* dye, const void* h, const Fp8Weights& w,
                             const ExpertOffsets& rows, int64_t E_local, int64_t H, int64_t F,
                             Fp8Recipe recipe, void* da, void* dh, void* dxe, GemmRunner& gemm,
                             const Fp8Scratch& sc, cudaStream_t stream, float* report) {
  if (recipe != Fp8Recipe::kTensor) report = nullptr;
  quantize_fp8_gemm_operands(ExpertGemm::kDgradA, dye, rows, E_local, H, F, recipe, sc, stream);
  if (report)
    report_tensor_scales(sc.a_scales, E_local, report + int64_t(Fp8Computed::kDy) * E_local,
                         stream);
  run_fp8_gemm(ExpertGemm::kDgradA, w, rows, E_local, H, F, recipe, DType::kBf16, false, da, gemm,
               sc, stream);
  const GroupAmax dh_amax = amax_into_scales(rows, E_local, recipe, sc, stream);
  swiglu_bwd(da, h, rows.device + E_local, rows.rows_bound, F, DType::kBf16, dh, stream, dh_amax);
  quantize_fp8_gemm_operands(ExpertGemm::kDgradX, dh, rows, E_local, H, F, recipe, sc, stream,
                             dh_amax.bits != nullptr);
  if (report)
    report_tensor_scales(sc.a_scales, E_local, report + int64_t(Fp8Computed::kDh) * E_local,
                         stream);
  run_fp8_gemm(ExpertGemm::kDgradX, w, rows, E_local, H, F, recipe, DType::kBf16, false, dxe, gemm,
               sc, stream);
}

void expert_ffn_bwd_weights_fp8(const void* xe, const void* a, const void* dye, const void* dh,
                                bool dy_dh_left, const ExpertOffsets& rows, int64_t E_local,
                                int64_t H, int64_t F, Fp8Recipe recipe, DType grad_dtype,
                                void* dw_in, void* dw_out, bool accumulate, GemmRunner& gemm,
                                const Fp8Scratch& sc, cudaStream_t stream, bool xe_packed,
                                const Fp8Kept& kept) {
  const Fp8Weights none;  // the weight gradients read no weight
  if (!dy_dh_left) {
    // The data gradients' quantizations leave the transposed codes (and row codes in sc.a, which
    // the weight gradients' own operands overwrite below).
    quantize_fp8_gemm_operands(ExpertGemm::kDgradA, dye, rows, E_local, H, F, recipe, sc, stream);
    quantize_fp8_gemm_operands(ExpertGemm::kDgradX, dh, rows, E_local, H, F, recipe, sc, stream);
  }
  // A weight gradient's first operand: its codes kept from the forward, else quantized here.
  if (!kept.a_t.codes)
    quantize_fp8_gemm_operands(ExpertGemm::kWgradOut, a, rows, E_local, H, F, recipe, sc, stream);
  run_fp8_gemm(ExpertGemm::kWgradOut, none, rows, E_local, H, F, recipe, grad_dtype, accumulate,
               dw_out, gemm, kept.a_t.codes ? with_first_operand(sc, kept.a_t) : sc, stream);
  if (kept.xe_t.codes) {
    MOE_CHECK(!xe_packed, "FP8: packed rows' transposed codes are not kept");
  } else if (xe_packed) {
    require_block_recipe(recipe);
    quantize_packed_cols_fp8(xe, rows.device, E_local, rows.rows_bound, H, sc.a,
                             fp8_transposed_ld(rows.rows_bound), sc.a_scales, stream);
  } else {
    quantize_fp8_gemm_operands(ExpertGemm::kWgradIn, xe, rows, E_local, H, F, recipe, sc, stream);
  }
  run_fp8_gemm(ExpertGemm::kWgradIn, none, rows, E_local, H, F, recipe, grad_dtype, accumulate,
               dw_in, gemm, kept.xe_t.codes ? with_first_operand(sc, kept.xe_t) : sc, stream);
}

}  // namespace moe::cuda
