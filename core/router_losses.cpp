#include "core/router_losses.h"

namespace moe {

void router_losses(const float* global_stats, const RouterConfig& cfg, int64_t E, int64_t K,
                   int64_t N, double* aux, double* z) {
  double dot = 0.0;
  for (int64_t e = 0; e < E; e++) dot += double(global_stats[e]) * double(global_stats[E + e]);
  double n = double(N);
  *aux = cfg.aux_coeff * double(E) / (double(K) * n * n) * dot;
  *z = cfg.z_coeff / n * double(global_stats[2 * E]);
}

}  // namespace moe
