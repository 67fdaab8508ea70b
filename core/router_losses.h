#pragma once
// The router's auxiliary losses from the world's summed statistics (MATH.md): host arithmetic
// every backend's step and dump use after the statistics' all-reduce.
#include <cstdint>

#include "core/workload.h"

namespace moe {

// aux and z from global_stats [2E + 1] (the backends' router_loss_stats summed over the world:
// c_e, sum_t r[t, e], sum_t logsumexp^2); N = global token count.
void router_losses(const float* global_stats, const RouterConfig& cfg, int64_t E, int64_t K,
                   int64_t N, double* aux, double* z);

}  // namespace moe
