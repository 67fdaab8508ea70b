#pragma once
// The reference's dense arithmetic on the GPU (core/reference.h, ReferenceMath): fp32 on CUDA
// cores, with kernels written for this path alone (a tiled SGEMM, row gathers, SwiGLU). It uses
// no tensor cores and no code of the fast path (no cuBLASLt, permutation, all-to-all or grouped
// GEMM). Routing, capacity, losses and near ties stay in float64 on the host (reference_step).
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "core/init.h"
#include "core/reference.h"

namespace moe::cuda {

// A ReferenceMathFactory: uploads prob's x and dout (the world's tokens) and generates the weights
// from w's seed on the device, expert by expert as they are needed; prob's weights stay empty.
// Runs on the current device, on a stream of its own; every call returns synchronized.
std::unique_ptr<ReferenceMath> gpu_reference_math(const Workload& w, ReferenceProblem& prob);

// dst[i] = rule.value(begin + i) for i < n, on the device: the same values as core/init.cpp.
// Deliberately not the backend's cuda::fill_seeded: a GPU-reference check then also catches a
// backend that filled its weights wrongly (an offset, a shard boundary, the storage conversion).
void generate_weights(const InitRule& rule, int64_t begin, int64_t n, float* dst,
                      cudaStream_t stream);

// W [rows, cols] in place as core/fp8.cpp's fp8_quantize_weight does (its twin, for the FP8
// checks' weights): per 128 x 128 block or, per tensor, with one scale, whose amax goes through
// amax_scratch (one uint32_t). Exposed for its test.
void reference_quantize_weight(float* W, int64_t rows, int64_t cols, Fp8Recipe recipe,
                               uint32_t* amax_scratch, cudaStream_t stream);

// C [M, N] (+)= op(A) op(B) in fp32, row-major: op(A) [M, K] is A [M, K] (lda) or, transposed,
// A [K, M]; op(B) [K, N] is B [K, N] (ldb) or, transposed, B [N, K]. The reference's GEMM,
// exposed for its test.
void reference_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A,
                     int64_t lda, const float* B, int64_t ldb, bool accumulate, float* C,
                     int64_t ldc, cudaStream_t stream);

}  // namespace moe::cuda
