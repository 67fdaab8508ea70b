#pragma once
// The router settings every backend's router kernels require, checked the same way for both (the
// workload's validation gives the user-facing messages; this guards the kernels' own contract).
#include <cstdint>

#include "core/workload.h"

namespace moe {

// Throws moe::Error unless score is softmax|sigmoid, 0 < K <= E, softmax_after_topk only with
// softmax, and with groups > 1: groups divide E, 1 <= group_topk <= groups, group_topk divides K
// and K / group_topk fits in a group. Returns whether the scores are softmax.
bool check_router_shape(const RouterConfig& cfg, int64_t E, int64_t K);

}  // namespace moe
