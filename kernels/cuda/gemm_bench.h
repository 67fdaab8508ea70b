#pragma once
// The expert GEMMs alone (`moebench gemm`): the six GEMMs of one step's expert FFN on a workload's
// shapes, each through each expert GEMM method, timed with CUDA events, beside a dense GEMM of the
// up projection's total size as the machine's reference rate.
#include <cstdint>
#include <string>
#include <vector>

#include "core/fp8.h"
#include "core/workload.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/grouped_gemm.h"

namespace moe::cuda {

struct ExpertGemmBenchShape {
  int64_t E_local = 0, H = 0, F = 0;
  std::vector<int64_t> rows;  // per expert
  DType grad_dtype = DType::kFp32;
  GroupedSchedule sm90;                 // gemm.sm90_cluster, gemm.sm90_schedule
  int streams = 4;                      // gemm.streams: the cuBLASLt loop's side streams
  AlgoPolicy algo = AlgoPolicy::kAuto;  // gemm.algo
  // fp8_tensor or fp8_block: the six GEMMs in that recipe too (after the bf16 methods), and the
  // weights' quantization for the step.
  Precision precision = Precision::kBf16;
};

struct ExpertGemmBenchRow {
  // "up", "down", "dgrad_a", "dgrad_x", "wgrad_out", "wgrad_in"; "dense"; FP8's "weights" (both
  // weights quantized both ways round, once per step: no FLOPs)
  std::string gemm;
  // gemm.method name, "recipe:method" for an FP8 GEMM; the dense rows: "cublaslt" (bf16) and the
  // recipe (cuBLASLt's FP8 matmul); FP8's weights row: the recipe
  std::string method;
  Precision precision = Precision::kBf16;  // the GEMM's arithmetic: its dense row's
  int64_t M = 0, N = 0, K = 0;  // per expert, at the mean row count (the dense one: its own)
  double flops = 0;             // over every expert
  double median_ms = 0;         // FP8: its activations' quantization and the GEMM
  double quantize_ms = 0;       // FP8: the activations' quantization alone
  // quantize_ms applies: an FP8 expert GEMM (0 where the step takes codes its forward kept) or
  // the weights row.
  bool quantizes = false;
};

// A dense FP8 GEMM C [M, N] = A [M, K] @ B [N, K]^T in a recipe, as the expert loop runs it: the
// rate FP8 expert GEMMs are measured against (the roofline's calibration, `moebench gemm`'s dense
// FP8 row). Its buffers' bytes (each operand's scales apart: cuBLASLt wants each aligned), and
// the problem over buffers of those sizes, the codes filled with the FP8 calibration pattern and
// the scales with 1 (their values do not change the work), on `stream`.
struct DenseFp8Bytes {
  size_t a = 0, b = 0, a_scales = 0, b_scales = 0;
};
DenseFp8Bytes dense_fp8_gemm_bytes(int64_t M, int64_t N, int64_t K, Fp8Recipe recipe);
Fp8Problem dense_fp8_gemm_problem(int64_t M, int64_t N, int64_t K, Fp8Recipe recipe, uint8_t* a,
                                  uint8_t* b, float* a_scales, float* b_scales, void* c,
                                  cudaStream_t stream);
// The cuBLASLt scaling a dense FP8 GEMM of the recipe runs with.
Fp8Scaling dense_fp8_scaling(Fp8Recipe recipe);

// methods: gemm.method names (lt_multistream, grouped_batched, grouped_sm90). `iters` timed
// calls of each after two untimed ones (an FP8 GEMM's two halves timed apart, each so). Inputs
// are bf16 filled with a fixed pattern. With an FP8 precision a second dense row, the same size in
// that recipe.
std::vector<ExpertGemmBenchRow> bench_expert_gemms(const ExpertGemmBenchShape& shape,
                                                   const std::vector<std::string>& methods,
                                                   int iters);

}  // namespace moe::cuda
