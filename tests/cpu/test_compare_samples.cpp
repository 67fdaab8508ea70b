// compare's rank test on per-step samples: on noisy CPU-like runs (p10-p90 spread about 35% of
// the median, occasional slow outliers) a real 30% slowdown is marked and two runs of the same
// work are not, over many seeds; results without samples keep the spread rule; bad times are
// refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "app/compare_command.h"
#include "core/error.h"
#include "core/stats.h"

namespace moe {
namespace {

using nlohmann::json;

// 20 step times (the default steps) as a noisy shared CPU gives them: lognormal around `median`
// with a p10-p90 spread of about 35% of the median, the spread seen on CI's CPU runs.
std::vector<double> noisy_steps(double median, uint64_t seed, int n = 20) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> z(0.0, 0.13);  // exp(+-1.28 * 0.13): -15% and +18% at p10/p90
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(median * std::exp(z(rng)));
  return v;
}

json result_with(const std::vector<double>& steps) {
  const Summary s = summarize(steps);
  return {{"schema_version", 1},
          {"provenance", {{"git_commit", "0123456789abcdef"}, {"backend", "cpu"}}},
          {"config", {{"name", "t"}, {"model", {{"hidden", 64}}}}},
          {"mesh", {{"world", 2}, {"ep", 2}, {"fsdp", 1}}},
          {"timing",
           {{"timed_steps", int(steps.size())},
            {"step", {{"median", s.median}, {"p10", s.p10}, {"p90", s.p90}}},
            {"samples_ms", {{"step", steps}}}}}};
}

std::string step_mark(const std::vector<double>& a, const std::vector<double>& b) {
  const std::vector<CompareRun> runs = {{"a.json", result_with(a)}, {"b.json", result_with(b)}};
  for (const CompareRow& r : build_rows(runs, -1, "timing"))
    if (r.metric == "step") return r.mark[1];
  ADD_FAILURE() << "no step row";
  return "?";
}

TEST(CompareSamples, TheRecordedNoiseIsWhatTheIssueDescribes) {
  // The spread rule's noise on these runs: about 35%, so it cannot see a 30% change.
  double spread = 0;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const Summary s = summarize(noisy_steps(10.0, seed));
    spread += (s.p90 - s.p10) / s.median / 50;
  }
  EXPECT_GT(spread, 0.30);
  EXPECT_LT(spread, 0.45);
}

// 200 pairs each way: the rule must catch the slowdown nearly always (at 20 steps a rank test
// at p < 0.001 has about 99% power for this shift) and almost never mark the same work.
TEST(CompareSamples, ARealThirtyPercentSlowdownIsMarked) {
  int marked = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed)
    marked += step_mark(noisy_steps(10.0, seed), noisy_steps(13.0, 1000 + seed)) == "slower";
  EXPECT_GE(marked, 194) << "a 30% slowdown went unmarked in " << 200 - marked << " of 200 pairs";
}

TEST(CompareSamples, TwoRunsOfTheSameWorkAreNotMarked) {
  int marked = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed)
    marked += !step_mark(noisy_steps(10.0, seed), noisy_steps(10.0, 5000 + seed)).empty();
  EXPECT_LE(marked, 2) << marked << " of 200 pairs of the same work were marked";
}

TEST(CompareSamples, WithoutSamplesTheSpreadRuleStays) {
  // The same 30% slowdown, but the results keep no samples (older files): the 35% spread hides it.
  json a = result_with(noisy_steps(10.0, 7)), b = result_with(noisy_steps(13.0, 8));
  a["timing"].erase("samples_ms");
  b["timing"].erase("samples_ms");
  const std::vector<CompareRun> runs = {{"a.json", a}, {"b.json", b}};
  for (const CompareRow& r : build_rows(runs, -1, "timing"))
    if (r.metric == "step") {
      EXPECT_EQ(r.mark[1], "");
    }
}

TEST(CompareSamples, MannWhitney) {
  EXPECT_NEAR(mann_whitney_p({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 5, 6, 7, 8}), 1.0, 1e-12);
  EXPECT_LT(mann_whitney_p({1, 2, 3, 4, 5, 6, 7, 8}, {11, 12, 13, 14, 15, 16, 17, 18}), 0.001);
  EXPECT_DOUBLE_EQ(mann_whitney_p({}, {1, 2}), 1.0);
  EXPECT_DOUBLE_EQ(mann_whitney_p({3, 3, 3}, {3, 3}), 1.0);  // all tied
  const std::vector<double> many = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(evenly_spaced(many, 5), (std::vector<double>{1, 3, 5, 7, 9}));
  EXPECT_EQ(evenly_spaced(many, 20), many);
}

TEST(CompareSamples, RefusesTimesThatAreNotMeasurements) {
  for (double bad : {0.0, -1.0, std::nan("")}) {
    json r = result_with({10, 11, 12});
    r["timing"]["samples_ms"]["step"][1] = bad;
    EXPECT_THROW(check_result(r, "bad.json"), UserError) << bad;
  }
  json none = result_with({10, 11});
  none["timing"]["timed_steps"] = 0;
  EXPECT_THROW(check_result(none, "none.json"), UserError);
  json zero = result_with({10, 11});
  zero["timing"]["step"]["median"] = 0.0;
  EXPECT_THROW(check_result(zero, "zero.json"), UserError);
}

}  // namespace
}  // namespace moe
