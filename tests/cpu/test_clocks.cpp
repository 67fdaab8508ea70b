// core/clocks.h: a rank's clock samples summarized (medians, the shares held down for power or
// heat), the fixed-size form ranks gather it in, and the report's "# clocks:" lines.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "app/report.h"
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

// The "# clocks:" lines print_clocks writes for `c`.
std::string clocks_text(const ClocksReport& c) {
  char* buf = nullptr;
  size_t size = 0;
  std::FILE* f = open_memstream(&buf, &size);
  print_clocks(c, f, "the timed steps");
  std::fclose(f);
  std::string text(buf, size);
  std::free(buf);
  return text;
}

ClockSummary rank_at(double mhz, int64_t samples) {
  ClockSummary k;
  k.samples = samples;
  k.sm_mhz.median = k.sm_mhz.p10 = k.sm_mhz.p90 = mhz;
  k.power_w.median = 690;
  k.power_limit_w = 700;
  k.power_limited_share = 1;
  return k;
}

TEST(Clocks, ReportOfRanks) {
  ClockSummary none, some;
  some.samples = 4;
  const ClocksReport empty = clocks_report({none, none}, "NVML", "no samples");
  EXPECT_TRUE(empty.ranks.empty());
  EXPECT_EQ(empty.source, "");
  EXPECT_EQ(empty.why_none, "no samples");
  const ClocksReport one = clocks_report({none, some}, "NVML", "no samples");
  ASSERT_EQ(one.ranks.size(), 2u);  // every rank kept, the one without samples too
  EXPECT_EQ(one.ranks[1].samples, 4);
  EXPECT_EQ(one.source, "NVML");
  EXPECT_EQ(one.why_none, "");
}

TEST(Clocks, ReportLines) {
  ClocksReport none;
  none.why_none = "the cpu backend has no GPU clocks to sample";
  EXPECT_EQ(clocks_text(none), "# clocks: none (the cpu backend has no GPU clocks to sample)\n");
  // Two ranks: the slower and the faster named, every sample counted.
  ClocksReport two;
  two.source = "NVML";
  two.ranks = {rank_at(1470, 51), rank_at(1395, 51)};
  const std::string t = clocks_text(two);
  EXPECT_NE(t.find("# clocks: SM 1395 MHz (rank 1) to 1470 MHz (rank 0), the ranks' medians"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("of a 700 W limit; held down for power in 100%, for heat in 0% of 102 samples "
                   "(NVML, every 10 ms of the timed steps)"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("took a sample"), std::string::npos) << t;
  // A rank without samples: the others' clocks, and a line that says whose.
  two.ranks[0].samples = 0;
  const std::string part = clocks_text(two);
  EXPECT_NE(part.find("# clocks: SM 1395 MHz (median"), std::string::npos) << part;
  EXPECT_NE(part.find("# clocks: 1 of 2 ranks took a sample"), std::string::npos) << part;
}

}  // namespace
}  // namespace moe
