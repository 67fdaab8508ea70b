#pragma once
// A small workload for whole-step tests on one rank: 8 experts, top-2, 16 tokens, H 32, F 16,
// with the aux and z losses, changed by `sets` (--set assignments) and resolved.
#include <cstdint>
#include <string>
#include <vector>

#include "core/workload.h"

namespace moe::test {

inline Workload small_workload(const std::vector<std::string>& sets, uint64_t seed) {
  Workload w = workload_from_json_text(
      R"({"model": {"hidden": 32, "ffn": 16, "experts": 8, "topk": 2}, "tokens_per_rank": 16,
          "router": {"aux_coeff": 0.01, "z_coeff": 0.001}, "roofline": false})",
      "small");
  w.seed = seed;
  for (const std::string& set : sets) apply_override(w, set);
  resolve_and_validate(w, 1);
  return w;
}

}  // namespace moe::test
