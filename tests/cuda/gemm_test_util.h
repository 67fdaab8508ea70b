#pragma once
// What the GEMM tests (GemmRunner, the grouped sm90 kernel) share: seeded inputs rounded to the
// input dtype, and comparisons with the CPU twin within the output dtype's tolerance.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/workload.h"
#include "tests/cuda/cuda_test_util.h"

namespace moe::test {

// Uniform in [-1, 1), rounded to `dtype` so both sides see exactly the same values.
inline std::vector<float> random_values(int64_t n, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dtype == DType::kBf16 ? round_to_bf16(dist(rng)) : dist(rng);
  return v;
}

// Expert-major row offsets [G + 1] of groups with these row counts.
inline std::vector<int64_t> offsets_of(const std::vector<int64_t>& rows) {
  std::vector<int64_t> off(rows.size() + 1, 0);
  for (size_t g = 0; g < rows.size(); ++g) off[g + 1] = off[g] + rows[g];
  return off;
}

// got (GPU) against want (CPU twin) within the tolerance of the output dtype. Both sum in fp32
// and round once, in different orders: for a bf16 output, a sum close to a rounding boundary may
// round the other way, one bf16 ulp (inside 8e-3 relative); a handful beyond is allowed.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, DType out,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (out == DType::kBf16) {
    const int64_t bad = count_mismatches(got, want, 8e-3, what.c_str());
    EXPECT_LE(bad, 2 + int64_t(want.size()) / 1000) << what;
    EXPECT_LT(rel_l2(got, want), 2e-3) << what;
  } else {
    EXPECT_EQ(count_mismatches(got, want, 1e-4, what.c_str()), 0) << what;
    EXPECT_LT(rel_l2(got, want), 1e-5) << what;
  }
}

// Bitwise equality (K == 0 cases, determinism); prints the first differences.
inline void expect_identical(const std::vector<float>& got, const std::vector<float>& want,
                             const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      if (bad < 5) {
        std::printf("  %s[%zu]: got %.8g want %.8g\n", what.c_str(), i, got[i], want[i]);
      }
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

}  // namespace moe::test
