#include "dispatch/ranks_per_token.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace moe {

double ranks_per_token(const Workload& w, int64_t ep) {
  const int64_t E = w.model.experts, K = w.model.topk;
  switch (w.routing.mode) {
    case RoutingMode::kBalanced:
      return ranks_per_token_balanced(E, K, ep);
    case RoutingMode::kLearned:
      return ranks_per_token_random(E, K, ep, std::max<int64_t>(1, w.router.groups),
                                    std::max<int64_t>(1, w.router.group_topk));
    default:  // forced modes choose among all experts: the router's groups do not apply
      return ranks_per_token_random(E, K, ep, 1, 1);
  }
}

double ranks_per_token_balanced(int64_t E, int64_t K, int64_t ep) {
  MOE_CHECK(ep >= 1 && E % ep == 0 && K >= 1 && K <= E, "E " << E << " K " << K << " ep " << ep);
  const int64_t El = E / ep;
  // A token starting j experts into a rank's block reaches ceil((j + K) / El) ranks (all ep at
  // most: the block wraps around to rank 0).
  double sum = 0;
  for (int64_t j = 0; j < El; ++j) sum += double(std::min(ep, (j + K + El - 1) / El));
  return sum / double(El);
}

double ranks_per_token_random(int64_t E, int64_t K, int64_t ep, int64_t G, int64_t Gk) {
  MOE_CHECK(ep >= 1 && E % ep == 0 && G >= 1 && E % G == 0 && Gk >= 1 && Gk <= G && K >= 1 &&
                K <= Gk * (E / G),
            "E " << E << " K " << K << " ep " << ep << " G " << G << " Gk " << Gk);
  const int64_t El = E / ep, g = E / G, pool = Gk * g;
  double reached = 0;
  for (int64_t r = 0; r < ep; ++r) {
    // prob[c][m]: the chance that, of the groups seen so far, c are kept and they hold m of rank
    // r's experts; each group is kept with chance (Gk - c) / (groups left), which makes every set
    // of Gk groups equally likely.
    std::vector<std::vector<double>> prob(Gk + 1, std::vector<double>(El + 1, 0.0));
    prob[0][0] = 1;
    for (int64_t j = 0; j < G; ++j) {
      const int64_t overlap =
          std::max<int64_t>(0, std::min((j + 1) * g, (r + 1) * El) - std::max(j * g, r * El));
      const double left = double(G - j);
      for (int64_t c = std::min(Gk - 1, j); c >= 0; --c)
        for (int64_t m = El - overlap; m >= 0; --m) {
          const double keep = prob[c][m] * double(Gk - c) / left;
          prob[c][m] -= keep;
          prob[c + 1][m + overlap] += keep;
        }
    }
    // Given m of the pool's experts on rank r, K distinct experts drawn from the pool all miss it
    // with chance C(pool - m, K) / C(pool, K).
    double miss = 0;
    for (int64_t m = 0; m <= El; ++m) {
      double none = 1;
      for (int64_t i = 0; i < K; ++i)
        none *= std::max(0.0, double(pool - m - i)) / double(pool - i);
      miss += prob[Gk][m] * none;
    }
    reached += 1 - miss;
  }
  return reached;
}

double wire_rows_per_rank(const Workload& w, int64_t ep, double rows_per_rank) {
  return double(w.tokens_per_rank) * ranks_per_token(w, ep) * rows_per_rank /
         (double(w.tokens_per_rank) * double(w.model.topk));
}

}  // namespace moe
