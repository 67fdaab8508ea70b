// The NVML clock sampler (kernels/cuda/nvml_clocks.h) on the GPU: while on it reads plausible SM
// clocks and power every few milliseconds; off, it reads nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "kernels/cuda/nvml_clocks.h"
#include "tests/cuda/cuda_test_util.h"

namespace moe::test {
namespace {

// Keeps the GPU busy for about `ms` milliseconds.
__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

TEST(NvmlClocksCuda, SamplesWhileOn) {
  MOE_REQUIRE_GPU();
  std::string why;
  auto sampler = cuda::make_nvml_clock_sampler(0, why);
  if (!sampler) GTEST_SKIP() << "skipped: " << why;
  EXPECT_EQ(sampler->source(), "NVML");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // off: nothing recorded
  sampler->set_on(true);
  spin_kernel<<<132, 32>>>(200'000'000);  // about 0.1 s at 2 GHz
  CUDA_CHECK(cudaDeviceSynchronize());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  sampler->set_on(false);
  const auto samples = sampler->finish();
  // 0.1 s or more at one sample every 10 ms (a loaded host may be late, never far).
  EXPECT_GE(samples.size(), 5u);
  for (const ClockSample& s : samples) {
    EXPECT_GT(s.sm_mhz, 100);
    EXPECT_LT(s.sm_mhz, 5000);
    EXPECT_GT(s.power_w, 1);
    EXPECT_LT(s.power_w, 2000);
  }
  const double limit = sampler->power_limit_w();
  EXPECT_TRUE(limit == 0 || (limit > 50 && limit < 2000)) << limit;
  EXPECT_TRUE(sampler->finish().size() == samples.size());  // finished: no more samples
}

}  // namespace
}  // namespace moe::test
