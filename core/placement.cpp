#include "core/placement.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace moe {

static void fill_inverse(Placement& p) {
  p.slot_of_expert.assign(p.expert_of_slot.size(), -1);
  for (size_t g = 0; g < p.expert_of_slot.size(); ++g)
    p.slot_of_expert[size_t(p.expert_of_slot[g])] = int32_t(g);
}

bool places_experts(const Workload& w) {
  return w.expert_placement == ExpertPlacement::kBalanced && w.mesh.ep > 1;
}

Placement contiguous_placement(int64_t experts) {
  Placement p;
  p.expert_of_slot.resize(size_t(experts));
  std::iota(p.expert_of_slot.begin(), p.expert_of_slot.end(), 0);
  fill_inverse(p);
  return p;
}

Placement balanced_placement(const std::vector<double>& load, int64_t ep) {
  const int64_t E = int64_t(load.size());
  MOE_CHECK(ep >= 1 && E % ep == 0, "balanced_placement: " << E << " experts over ep " << ep);
  const int64_t El = E / ep;
  std::vector<int32_t> order(static_cast<size_t>(E));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return load[size_t(a)] > load[size_t(b)]; });
  std::vector<double> sum(static_cast<size_t>(ep), 0.0);
  std::vector<std::vector<int32_t>> held(static_cast<size_t>(ep));
  for (int32_t e : order) {
    int64_t best = -1;
    for (int64_t r = 0; r < ep; ++r)
      if (int64_t(held[size_t(r)].size()) < El && (best < 0 || sum[size_t(r)] < sum[size_t(best)]))
        best = r;
    held[size_t(best)].push_back(e);
    sum[size_t(best)] += load[size_t(e)];
  }
  Placement p;
  for (auto& h : held) {
    std::sort(h.begin(), h.end());
    p.expert_of_slot.insert(p.expert_of_slot.end(), h.begin(), h.end());
  }
  fill_inverse(p);
  return p;
}

PlacedExperts place_by_counts(const Workload& w, const float* counts) {
  const int64_t E = w.model.experts, ep = w.mesh.ep;
  PlacedExperts out;
  out.placement = contiguous_placement(E);
  if (!places_experts(w)) return out;
  const std::vector<double> load(counts, counts + E);
  out.contiguous_load = rank_load_max_over_mean(out.placement, load, ep);
  out.placement = balanced_placement(load, ep);
  out.placed_load = rank_load_max_over_mean(out.placement, load, ep);
  return out;
}

std::vector<double> rank_loads(const Placement& p, const std::vector<double>& load, int64_t ep) {
  const int64_t El = int64_t(load.size()) / ep;
  std::vector<double> sum(static_cast<size_t>(ep), 0.0);
  for (size_t g = 0; g < p.expert_of_slot.size(); ++g)
    sum[g / size_t(El)] += load[size_t(p.expert_of_slot[g])];
  return sum;
}

double rank_load_max_over_mean(const Placement& p, const std::vector<double>& load, int64_t ep) {
  const std::vector<double> sum = rank_loads(p, load, ep);
  const double total = std::accumulate(sum.begin(), sum.end(), 0.0);
  if (total <= 0) return 1.0;
  return *std::max_element(sum.begin(), sum.end()) / (total / double(ep));
}

}  // namespace moe
