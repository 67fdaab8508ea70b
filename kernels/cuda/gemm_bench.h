#pragma once
// The expert GEMMs alone (`moebench gemm`): the six GEMMs of one step's expert FFN on a workload's
// shapes, each through each expert GEMM method, timed with CUDA events, beside a dense GEMM of the
// up projection's total size as the machine's reference rate.
#include <cstdint>
#include <string>
#include <vector>

#include "core/workload.h"
#include "kernels/cuda/grouped_gemm.h"

namespace moe::cuda {

struct ExpertGemmBenchShape {
  int64_t E_local = 0, H = 0, F = 0;
  std::vector<int64_t> rows;  // per expert
  DType grad_dtype = DType::kFp32;
  GroupedSchedule sm90;  // gemm.sm90_cluster, gemm.sm90_schedule
  // fp8_tensor or fp8_block: the six GEMMs in that recipe too (after the bf16 methods), and the
  // weights' quantization for the step.
  Precision precision = Precision::kBf16;
};

struct ExpertGemmBenchRow {
  // "up", "down", "dgrad_a", "dgrad_x", "wgrad_out", "wgrad_in"; "dense"; FP8's "weights" (both
  // weights quantized both ways round, once per step: no FLOPs)
  std::string gemm;
  std::string method;  // gemm.method name ("cublaslt" for the dense reference), or the FP8 recipe
  int64_t M = 0, N = 0, K = 0;  // per expert, at the mean row count (the dense one: its own)
  double flops = 0;             // over every expert
  double median_ms = 0;         // FP8: its activations' quantization and the GEMM
  double quantize_ms = 0;       // FP8: the activations' quantization alone
};

// methods: gemm.method names (lt_multistream, grouped_batched, grouped_sm90). `iters` timed
// calls of each after two untimed ones (an FP8 GEMM's two halves timed apart, each so). Inputs
// are bf16 filled with a fixed pattern.
std::vector<ExpertGemmBenchRow> bench_expert_gemms(const ExpertGemmBenchShape& shape,
                                                   const std::vector<std::string>& methods,
                                                   int iters);

}  // namespace moe::cuda
