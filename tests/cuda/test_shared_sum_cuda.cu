// The shared experts' sums (kernels/cuda/shared_sum.h) against their CPU twin on seeded random
// values already rounded to the storage dtype: bitwise equal (both add the stored value, then each
// shared expert's row, in fp32; no product to contract into an FMA), on the 16-byte path and the
// element path (a length that is no multiple of a vector, a base one element off).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "kernels/cpu/shared_sum.h"
#include "kernels/cuda/shared_sum.h"
#include "tests/cuda/cuda_test_util.h"

namespace moe::test {
namespace {

std::vector<float> seeded(int64_t n, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dtype == DType::kBf16 ? round_to_bf16(g(rng)) : g(rng);
  return v;
}

struct Case {
  int64_t S, n;
  int shift;  // 0: aligned bases, 1: one element off (the element path)
};

TEST(SharedSumCuda, MatchesCpuTwinBitwise) {
  MOE_REQUIRE_GPU();
  const Case cases[] = {{1, 64 * 128, 0}, {3, 64 * 128, 0}, {2, 1001, 0}, {2, 64 * 128, 1}};
  for (DType dtype : {DType::kBf16, DType::kFp32})
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " S " + std::to_string(c.S) + " n " +
                   std::to_string(c.n) + " shift " + std::to_string(c.shift));
      const std::vector<float> rows = seeded(c.S * c.n, dtype, 1 + c.S);
      const std::vector<float> out0 = seeded(c.n, dtype, 7);
      std::vector<float> acc0 = seeded(c.n, DType::kFp32, 8);

      std::vector<float> want_out = out0, want_acc = acc0;
      cpu::shared_sum_out(rows.data(), c.S, c.n, dtype, want_out.data());
      cpu::shared_sum_dx(rows.data(), c.S, c.n, want_acc.data());

      StorageBuf d_rows(dtype, shifted_by(rows, c.shift)), d_out(dtype, shifted_by(out0, c.shift));
      DevBuf<float> d_acc(shifted_by(acc0, c.shift));
      const size_t eb = dtype == DType::kBf16 ? 2 : 4;
      const void* r = static_cast<const char*>(d_rows.ptr) + c.shift * eb;
      cuda::shared_sum_out(r, c.S, c.n, dtype, static_cast<char*>(d_out.ptr) + c.shift * eb,
                           nullptr);
      cuda::shared_sum_dx(r, c.S, c.n, dtype, d_acc.ptr + c.shift, nullptr);
      const std::vector<float> got_out = d_out.host(), got_acc = d_acc.host();
      const std::vector<float> out(got_out.begin() + c.shift, got_out.begin() + c.shift + c.n);
      const std::vector<float> acc(got_acc.begin() + c.shift, got_acc.begin() + c.shift + c.n);
      EXPECT_EQ(count_mismatches(out, want_out, 0.0, "out"), 0);
      EXPECT_EQ(count_mismatches(acc, want_acc, 0.0, "dx_acc"), 0);
    }
}

}  // namespace
}  // namespace moe::test
