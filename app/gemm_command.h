#pragma once
// `moebench gemm`: the six expert GEMMs of a workload's step alone, on its shapes at balanced
// routing or at its first step's routing, through each expert GEMM method of the CUDA backend,
// with TFLOP/s per GEMM and against a dense GEMM of the same size. The microbenchmark of the
// grouped GEMM work.
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
  std::string out;                // result JSON (atomically), optional
  std::string rows = "balanced";  // balanced | routed: where the rows per expert come from
  std::string command_line;       // for the result's provenance
};

CLI::App* add_gemm_subcommand(CLI::App& app, GemmBenchOptions& opt);

// Rows each of the E / ep local experts receives at balanced routing: T * K * ep / E (the T * K
// rows of every rank spread evenly; a remainder to the first experts), each padded to a multiple
// of the workload's align.
std::vector<int64_t> balanced_expert_rows(const Workload& w, int64_t ep);

// Rows each local expert of the EP rank with the most rows receives in a step routed as
// counts_by_source says ([source rank][expert], first_step_counts_by_source in
// app/first_routing.h, the ep ranks of one EP group): a capacity caps each source's rows to each
// expert, expert_placement places the experts by the routed counts as `run` does, and each
// expert's rows are padded to a multiple of align. The lowest such rank at a tie.
struct RoutedExpertRows {
  int64_t ep_rank = 0;
  std::vector<int64_t> rows;  // per local expert, in slot order
};
RoutedExpertRows routed_expert_rows(const Workload& w, int64_t ep,
                                    const std::vector<std::vector<float>>& counts_by_source);

int gemm_command(const GemmBenchOptions& opt);

}  // namespace moe
