#pragma once
// Elementwise comparison of a backend's floats with a float64 expectation, for the CPU kernel
// tests.
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

}  // namespace moe::test
