#pragma once
// Comparing a backend's floats with an expectation, for the CPU tests: elementwise against
// float64, or by relative L2 distance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <vector>

namespace moe::test {

// |got - ref| <= rel * |ref| + slack[i] elementwise; slack covers fp32 cancellation. Prints the
// first few mismatches.
inline void expect_close(const char* what, const std::vector<float>& got,
                         const std::vector<double>& ref, double rel,
                         const std::vector<double>& slack) {
  constexpr int kShowMismatches = 8;
  ASSERT_EQ(got.size(), ref.size()) << what;
  std::ostringstream os;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - ref[i]);
    if (err <= rel * std::fabs(ref[i]) + slack[i]) continue;  // false for NaN
    if (bad++ < kShowMismatches)
      os << "\n  [" << i << "] got " << got[i] << " want " << ref[i] << " (err " << err << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " out of tolerance"
                    << os.str();
}

// ||got - ref|| / ||ref||, summed in float64.
inline double rel_l2(const std::vector<float>& got, const std::vector<float>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  return std::sqrt(diff / norm);
}

}  // namespace moe::test
