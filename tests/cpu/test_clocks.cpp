// core/clocks.h: a rank's clock samples summarized (medians, the shares held down for power or
// heat), and the fixed-size form ranks gather it in.
#include <gtest/gtest.h>

#include <vector>

#include "core/clocks.h"

namespace moe {
namespace {

TEST(Clocks, SummaryOfSamples) {
  std::vector<ClockSample> s;
  for (int i = 0; i < 10; ++i) {
    ClockSample c;
    c.sm_mhz = 1400 + 10 * i;  // 1400 .. 1490
    c.power_w = 690 + i % 3;
    c.power_limited = i < 7;
    c.thermal_limited = i == 9;
    s.push_back(c);
  }
  const ClockSummary k = summarize_clocks(s, 700);
  EXPECT_EQ(k.samples, 10);
  EXPECT_DOUBLE_EQ(k.sm_mhz.median, 1445);
  EXPECT_DOUBLE_EQ(k.sm_mhz.min, 1400);
  EXPECT_DOUBLE_EQ(k.sm_mhz.max, 1490);
  EXPECT_DOUBLE_EQ(k.power_w.max, 692);
  EXPECT_DOUBLE_EQ(k.power_limit_w, 700);
  EXPECT_DOUBLE_EQ(k.power_limited_share, 0.7);
  EXPECT_DOUBLE_EQ(k.thermal_limited_share, 0.1);
}

TEST(Clocks, NoSamples) {
  const ClockSummary k = summarize_clocks({}, 0);
  EXPECT_EQ(k.samples, 0);
  EXPECT_DOUBLE_EQ(k.power_limited_share, 0);
}

TEST(Clocks, PackedRoundTrip) {
  std::vector<ClockSample> s(3);
  s[0].sm_mhz = 1980, s[1].sm_mhz = 1500, s[2].sm_mhz = 1200;
  s[0].power_w = 300, s[1].power_w = 650, s[2].power_w = 700;
  s[2].power_limited = true;
  const ClockSummary k = summarize_clocks(s, 700);
  double packed[kClockSummaryDoubles];
  pack_clock_summary(k, packed);
  const ClockSummary u = unpack_clock_summary(packed);
  EXPECT_EQ(u.samples, 3);
  EXPECT_DOUBLE_EQ(u.sm_mhz.median, k.sm_mhz.median);
  EXPECT_DOUBLE_EQ(u.sm_mhz.p10, k.sm_mhz.p10);
  EXPECT_DOUBLE_EQ(u.sm_mhz.p90, k.sm_mhz.p90);
  EXPECT_DOUBLE_EQ(u.sm_mhz.min, 1200);
  EXPECT_DOUBLE_EQ(u.sm_mhz.max, 1980);
  EXPECT_DOUBLE_EQ(u.power_w.median, 650);
  EXPECT_DOUBLE_EQ(u.power_w.max, 700);
  EXPECT_DOUBLE_EQ(u.power_limit_w, 700);
  EXPECT_DOUBLE_EQ(u.power_limited_share, 1.0 / 3);
  EXPECT_DOUBLE_EQ(u.thermal_limited_share, 0);
}

}  // namespace
}  // namespace moe
