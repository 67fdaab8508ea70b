#pragma once
// The one CPU matrix multiply every GEMM of the step goes through: fp32 accumulation, output
// rounded to the storage dtype (bf16 output) or kept fp32 (gradients, logits).
#include <cstdint>

#include "core/fp8.h"
#include "core/grouped_gemm.h"
#include "core/workload.h"

namespace moe::cpu {

// C [M, N] = op(A) @ op(B) (+ C when accumulate), row-major; op(A) is [M, K] (A stored [M, K], or
// [K, M] when trans_a), op(B) is [K, N] (B stored [K, N], or [N, K] when trans_b). The sum is
// formed in fp32 and rounded once to out_dtype. K == 0 gives zeros (or C unchanged).
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A,
          const float* B, float* C, bool accumulate, DType out_dtype);

// The expert GEMMs of G groups in one call (core/grouped_gemm.h gives the three layouts):
// offsets [G + 1] delimit each group's rows. The CPU twin of moe::cuda::grouped_gemm: a gemm per
// group, outputs rounded to out_dtype. accumulate adds the weight gradients (kRowsTTimesRows) to
// C, as gemm's accumulate does; the other layouts always overwrite.
void grouped_gemm(GroupedLayout layout, int64_t G, const int64_t* offsets, int64_t M, int64_t N,
                  int64_t K, const float* A, const float* B, float* C, DType out_dtype,
                  bool accumulate = false);

// grouped_gemm with each group's operands quantized to FP8 first (core/fp8.h: the blocks of
// `recipe` laid on that group's rows only), then multiplied as grouped_gemm multiplies: what
// ../shared/MATH.md's "FP8 expert GEMMs" computes. a_quantized: A holds quantized values already
// (dispatch_dtype fp8's rows), which it multiplies as they are.
void grouped_gemm_fp8(GroupedLayout layout, int64_t G, const int64_t* offsets, int64_t M, int64_t N,
                      int64_t K, const float* A, const float* B, float* C, DType out_dtype,
                      Fp8Recipe recipe, bool accumulate = false, bool a_quantized = false);

// Rounds v to the storage dtype (identity for fp32).
float store_as(DType dtype, float v);

}  // namespace moe::cpu
