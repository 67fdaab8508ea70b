#pragma once
// Summary statistics of per-step samples (the report's median, p10, p90, min, max).
#include <cstddef>
#include <vector>

namespace moe {

struct Summary {
  int count = 0;
  double median = 0, p10 = 0, p90 = 0, min = 0, max = 0, mean = 0;
};

// Percentiles by linear interpolation between order statistics (numpy's default).
Summary summarize(std::vector<double> samples);

// Two-sided p-value of the Mann-Whitney U test that a and b come from one distribution (normal
// approximation with the tie correction and a continuity correction; good from about 8 samples
// each). Rank-based: robust to the outliers of a noisy machine, unlike a test of means. 1 where
// either sample is empty or every value is tied.
double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b);

// Whether samples taken in order drift: the medians of their first, middle and last thirds (sizes
// within one of each other) and how far apart those are, largest / smallest - 1. Fewer than 9
// samples (or a median <= 0): no thirds, spread 0.
struct Drift {
  std::vector<double> thirds;
  double spread = 0;
};
// The spread past which the report and compare say a run's median is no steady state's.
constexpr double kDriftWarning = 0.05;
Drift drift_by_thirds(const std::vector<double>& samples);

// At most `most` of the samples, evenly spaced (all of them when there are no more), in order.
std::vector<double> evenly_spaced(const std::vector<double>& samples, size_t most);

}  // namespace moe
