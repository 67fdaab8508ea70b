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
};

struct ExpertGemmBenchRow {
  std::string gemm;    // "up", "down", "dgrad_a", "dgrad_x", "wgrad_out", "wgrad_in"; "dense"
  std::string method;  // gemm.method name ("cublaslt" for the dense reference)
  int64_t M = 0, N = 0, K = 0;  // per expert, at the mean row count (the dense one: its own)
  double flops = 0;             // over every expert
  double median_ms = 0;
};

// methods: gemm.method names (lt_multistream, grouped_batched, grouped_sm90). `iters` timed
// calls of each after two untimed ones. Inputs are bf16 filled with a fixed pattern.
std::vector<ExpertGemmBenchRow> bench_expert_gemms(const ExpertGemmBenchShape& shape,
                                                   const std::vector<std::string>& methods,
                                                   int iters);

}  // namespace moe::cuda
