#include "core/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace moe {
namespace {

double percentile(const std::vector<double>& sorted, double q) {
  const double pos = q * double(sorted.size() - 1);
  const size_t lo = size_t(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - double(lo)) * (sorted[hi] - sorted[lo]);
}

}  // namespace

Summary summarize(std::vector<double> v) {
  Summary s;
  s.count = int(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = percentile(v, 0.5);
  s.p10 = percentile(v, 0.1);
  s.p90 = percentile(v, 0.9);
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  return s;
}

Drift drift_by_thirds(const std::vector<double>& samples) {
  Drift d;
  const size_t n = samples.size();
  if (n < 9) return d;
  for (size_t i = 0; i < 3; ++i)
    d.thirds.push_back(summarize(std::vector<double>(samples.begin() + long(i * n / 3),
                                                     samples.begin() + long((i + 1) * n / 3)))
                           .median);
  const auto [lo, hi] = std::minmax_element(d.thirds.begin(), d.thirds.end());
  if (*lo <= 0) return Drift{};
  d.spread = *hi / *lo - 1;
  return d;
}

double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n1 = a.size(), n2 = b.size(), n = n1 + n2;
  if (n1 == 0 || n2 == 0) return 1.0;
  std::vector<std::pair<double, int>> all;  // value, 0 for a and 1 for b
  for (double v : a) all.push_back({v, 0});
  for (double v : b) all.push_back({v, 1});
  std::sort(all.begin(), all.end());
  double rank_sum_a = 0, ties = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && all[j].first == all[i].first) ++j;
    const double t = double(j - i), mid_rank = (double(i) + double(j) + 1) / 2;  // 1-based
    for (size_t k = i; k < j; ++k)
      if (all[k].second == 0) rank_sum_a += mid_rank;
    ties += t * t * t - t;
    i = j;
  }
  const double u = rank_sum_a - double(n1) * double(n1 + 1) / 2;
  const double mean = double(n1) * double(n2) / 2;
  const double var =
      double(n1) * double(n2) / 12 * (double(n + 1) - ties / (double(n) * double(n - 1)));
  if (!(var > 0)) return 1.0;
  const double z = std::max(0.0, std::fabs(u - mean) - 0.5) / std::sqrt(var);
  return std::erfc(z / std::sqrt(2.0));
}

std::vector<double> evenly_spaced(const std::vector<double>& samples, size_t most) {
  if (samples.size() <= most || most == 0) return samples;
  std::vector<double> out;
  for (size_t i = 0; i < most; ++i) out.push_back(samples[i * samples.size() / most]);
  return out;
}

}  // namespace moe
