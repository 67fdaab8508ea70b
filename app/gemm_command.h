#pragma once
// `moebench gemm`: the six expert GEMMs of a workload's step alone, on its shapes at balanced
// routing, through each expert GEMM method of the CUDA backend, with TFLOP/s per GEMM and against
// a dense GEMM of the same size. The microbenchmark of the grouped GEMM work.
#include <cstdint>
#include <string>
#include <vector>

#include "core/workload.h"

namespace CLI {
class App;
}

namespace moe {

struct GemmBenchOptions {
  std::string config;
  std::vector<std::string> sets;
  int64_t ep = 0;  // 0: the workload's mesh.ep, or 1 where that is auto
  int iters = 20;
  std::vector<std::string> methods = {"lt_multistream", "grouped_batched", "grouped_sm90"};
  std::string out;  // result JSON (atomically), optional
};

CLI::App* add_gemm_subcommand(CLI::App& app, GemmBenchOptions& opt);

// Rows each of the E / ep local experts receives at balanced routing: T * K * ep / E (the T * K
// rows of every rank spread evenly; a remainder to the first experts), each padded to a multiple
// of the workload's align.
std::vector<int64_t> balanced_expert_rows(const Workload& w, int64_t ep);

int gemm_command(const GemmBenchOptions& opt);

}  // namespace moe
