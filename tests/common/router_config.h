#pragma once
// RouterConfig in one line, for the router and reference tests of both backends.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/workload.h"

namespace moe::test {

inline RouterConfig make_cfg(const std::string& score, bool after_topk, bool normalize,
                             double scaling, int64_t groups, int64_t group_topk, double aux = 0.0,
                             double z = 0.0) {
  RouterConfig c;
  if (score != "softmax" && score != "sigmoid") throw std::invalid_argument("score " + score);
  c.score = score == "sigmoid" ? RouterScore::kSigmoid : RouterScore::kSoftmax;
  c.softmax_after_topk = after_topk;
  c.normalize_topk = normalize;
  c.scaling = scaling;
  c.groups = groups;
  c.group_topk = group_topk;
  c.aux_coeff = aux;
  c.z_coeff = z;
  return c;
}

}  // namespace moe::test
