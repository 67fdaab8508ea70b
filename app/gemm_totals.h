#pragma once
// `moebench gemm`'s totals: what the six expert GEMMs of a step take together, per method and
// with the fastest method of each GEMM (as `gemm.method auto` mixes them), per arithmetic; and
// with an FP8 recipe, how much faster its six are than bf16's, their activations' quantization
// included: the step's expert GEMMs' share of what FP8 buys, on the shapes timed.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/workload.h"

namespace moe {

// One timed row of `moebench gemm`: an expert GEMM ("up" ... "wgrad_in"), or the "dense" and
// FP8 "weights" rows, which the totals leave out.
struct GemmTime {
  std::string gemm;
  std::string method;  // FP8: "recipe:method"
  Precision precision = Precision::kBf16;
  double median_ms = 0;
  double quantize_ms = 0;  // FP8: the activations' quantization, inside median_ms
};

struct GemmSum {
  double ms = 0, quantize_ms = 0;
  int gemms = 0;  // how many expert GEMMs it sums (six where a method ran them all)
};

struct PrecisionTotals {
  Precision precision = Precision::kBf16;
  std::vector<std::pair<std::string, GemmSum>> by_method;  // in the rows' order
  GemmSum fastest_each;        // each expert GEMM at its fastest method's median
  double speedup_vs_bf16 = 0;  // FP8: bf16's fastest_each.ms / this one's; 0 for bf16 itself
};

// The totals of each arithmetic among the rows, bf16 first; none without expert GEMM rows.
std::vector<PrecisionTotals> gemm_totals(const std::vector<GemmTime>& rows);

// The `# totals:` lines moebench gemm prints after its table, and their JSON (`totals`).
std::string format_gemm_totals(const std::vector<PrecisionTotals>& totals);
nlohmann::json gemm_totals_json(const std::vector<PrecisionTotals>& totals);

}  // namespace moe
