#pragma once
// Summary statistics of per-step samples (the report's median, p10, p90, min, max).
#include <vector>

namespace moe {

struct Summary {
  int count = 0;
  double median = 0, p10 = 0, p90 = 0, min = 0, max = 0, mean = 0;
};

// Percentiles by linear interpolation between order statistics (numpy's default).
Summary summarize(std::vector<double> samples);

}  // namespace moe
