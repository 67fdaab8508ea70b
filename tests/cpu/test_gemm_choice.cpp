// GemmMethodChoice: which warm-up steps try which methods, which GEMMs leave the fastest method
// for another, and that the mix is kept only where it beat that method side by side.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/gemm_choice.h"
#include "app/report.h"

namespace moe {
namespace {

ExpertGemmMethods all(const std::string& m) {
  ExpertGemmMethods a;
  a.fill(m);
  return a;
}

// up, down and dgrad_a faster on a (by more than the switch margin); dgrad_x and the weight
// gradients on b.
const ExpertGemmMs kTimesA = {1.0, 1.0, 1.0, 3.0, 3.0, 3.0};
const ExpertGemmMs kTimesB = {2.0, 2.0, 2.0, 2.0, 2.0, 2.0};
const ExpertGemmMs kNoTimes = {NAN, NAN, NAN, NAN, NAN, NAN};
const ExpertGemmMethods kMixAB = {"a", "a", "a", "b", "b", "b"};

// Records steps 0, 1, ... of a choice whose tries start at step 0: each step's experts ms, and
// its GEMMs' times where it tries one method (kNoTimes after those).
void record_steps(GemmMethodChoice& c, const std::vector<double>& experts_ms,
                  const std::vector<ExpertGemmMs>& gemm_ms) {
  for (size_t s = 0; s < experts_ms.size(); ++s)
    c.record(int64_t(s), experts_ms[s], s < gemm_ms.size() ? gemm_ms[s] : kNoTimes);
}

TEST(GemmChoice, TriesEachMethodTwiceThenTheMixAgainstTheFastest) {
  GemmMethodChoice c({"a", "b"}, 9);
  ASSERT_TRUE(c.active());
  EXPECT_EQ(c.added_steps(), 9);  // the choice's own warm-up
  EXPECT_EQ(c.untimed_steps(), 18);
  EXPECT_FALSE(c.methods_for_step(0));  // the first warm-up step pays one-off costs, untried
  EXPECT_FALSE(c.times_gemms(0));
  EXPECT_EQ(c.methods_for_step(1), all("a"));
  EXPECT_EQ(c.methods_for_step(2), all("b"));
  EXPECT_EQ(c.methods_for_step(3), all("a"));
  EXPECT_EQ(c.methods_for_step(4), all("b"));
  for (int64_t s = 1; s <= 4; ++s) EXPECT_TRUE(c.times_gemms(s)) << s;
  c.record(0, 1.0, kTimesB);  // not a try: ignored
  c.record(1, 9.0, kTimesA);
  c.record(2, 7.0, kTimesB);
  c.record(3, 6.0, kTimesA);  // a's better try: a is the base
  c.record(4, 8.0, kTimesB);
  // The mix and the base in turn, not timed per GEMM.
  EXPECT_EQ(c.methods_for_step(5), kMixAB);
  EXPECT_EQ(c.methods_for_step(6), all("a"));
  EXPECT_EQ(c.methods_for_step(7), kMixAB);
  EXPECT_EQ(c.methods_for_step(8), all("a"));
  for (int64_t s = 5; s <= 8; ++s) EXPECT_FALSE(c.times_gemms(s)) << s;
  c.record(5, 5.5, kNoTimes);
  c.record(6, 6.2, kNoTimes);
  c.record(7, 5.0, kNoTimes);
  c.record(8, 5.9, kNoTimes);
  c.record(9, 0.5, kNoTimes);   // the choice's own warm-up: ignored
  c.record(18, 0.5, kNoTimes);  // a timed step: ignored
  EXPECT_EQ(c.choice(), kMixAB);
  EXPECT_EQ(c.choice_name(), "per_gemm");
  EXPECT_EQ(c.methods_for_step(9), kMixAB);  // before the choice's own warm-up
  for (int64_t s = 10; s < 20; ++s)
    EXPECT_FALSE(c.methods_for_step(s)) << s;  // set once: its warm-up and the timed steps keep it
  EXPECT_EQ(c.tries_ms(), (std::map<std::string, double>{{"a", 6.0}, {"b", 7.0}}));
  EXPECT_EQ(c.gemm_tries_ms().at("a").at("dgrad_x"), 3.0);
  EXPECT_EQ(c.gemm_tries_ms().at("b").at("up"), 2.0);
  const PerGemmTry t = c.per_gemm_try();
  EXPECT_TRUE(t.tried);
  EXPECT_EQ(t.methods, kMixAB);
  EXPECT_EQ(t.against, "a");
  EXPECT_EQ(t.ms, 5.0);
  EXPECT_EQ(t.against_ms, 5.9);
  EXPECT_NE(c.summary().find("per_gemm (chosen in warm-up: a 6.00 ms, b 7.00 ms experts fwd+bwd; "
                             "per_gemm (up a, down a, dgrad_a a, dgrad_x b, wgrad_out b, wgrad_in "
                             "b) 5.00 ms against a 5.90 ms in alternate steps)"),
            std::string::npos)
      << c.summary();
}

// The mix is kept only where it beat the base side by side.
TEST(GemmChoice, TheBaseFasterThanTheMixSideBySideStays) {
  GemmMethodChoice c({"a", "b"}, 8);
  // a, b, a, b, then the mix (6.2, 6.3) and a (6.1, 6.4) in turn.
  record_steps(c, {6.0, 7.0, 6.5, 7.5, 6.2, 6.1, 6.3, 6.4}, {kTimesA, kTimesB, kTimesA, kTimesB});
  EXPECT_EQ(c.choice(), all("a"));
  EXPECT_EQ(c.choice_name(), "a");
  EXPECT_TRUE(c.per_gemm_try().tried);
  EXPECT_EQ(c.per_gemm_try().ms, 6.2);
  // Equal times: the base, not the mix.
  GemmMethodChoice tie({"a", "b"}, 8);
  for (int64_t s = 0; s < 8; ++s) tie.record(s, 5.0, s % 2 ? kTimesB : kTimesA);
  EXPECT_EQ(tie.choice_name(), "a");
}

// A GEMM leaves the base only for a method faster on it by the margin, the fastest such one,
// from each method's better try; a GEMM no method timed stays on the base. No GEMM switched:
// the alternate steps run the base throughout, and it is the choice.
TEST(GemmChoice, AGemmLeavesTheBaseOnlyForAClearlyFasterMethod) {
  GemmMethodChoice c({"a", "b", "c"}, 10);
  c.record(0, 9.0, {5, 5, 5, 5, 6.0, NAN});
  c.record(1, 8.0, {4, 6, 6, 6, 6.0, NAN});
  c.record(2, 7.0, {6, 6, 6, 4, 6.0, NAN});  // c: the base
  c.record(3, 9.0, {5, 3, 5, 5, 6.0, NAN});  // a's second try: down at 3
  c.record(4, 8.0, {4, 6, 6, 6, 5.8, NAN});  // wgrad_out 5.8 on b: under 5% faster than 6
  c.record(5, 7.0, {6, 6, 6, 4, 6.0, NAN});
  const ExpertGemmMethods mix = {"b", "a", "a", "c", "c", "c"};
  EXPECT_EQ(c.methods_for_step(6), mix);
  EXPECT_EQ(c.methods_for_step(7), all("c"));
  EXPECT_EQ(c.per_gemm_try().methods, mix);
  // Every GEMM faster on b, the experts phases faster on a: the mix (all on b) against a.
  GemmMethodChoice all_b({"a", "b"}, 8);
  for (int64_t s = 0; s < 4; ++s)
    all_b.record(s, s % 2 ? 9.0 : 8.0, s % 2 ? ExpertGemmMs{1.0, 1, 1, 1, 1, 1} : kTimesB);
  EXPECT_EQ(all_b.methods_for_step(4), all("b"));
  EXPECT_EQ(all_b.methods_for_step(5), all("a"));
  for (int64_t s = 4; s < 8; ++s) all_b.record(s, s % 2 ? 8.0 : 7.0, kNoTimes);
  EXPECT_EQ(all_b.choice_name(), "b");
  GemmMethodChoice close({"a", "b"}, 8);
  for (int64_t s = 0; s < 4; ++s)
    close.record(s, s % 2 ? 9.0 : 8.0, s % 2 ? ExpertGemmMs{1.92, 2, 2, 2, 2, 2} : kTimesB);
  EXPECT_EQ(close.methods_for_step(4), all("a"));  // 4% faster on up: not enough
  EXPECT_FALSE(close.per_gemm_try().tried);
  for (int64_t s = 4; s < 8; ++s) close.record(s, 1.0, kNoTimes);
  EXPECT_EQ(close.choice_name(), "a");
  EXPECT_NE(close.summary().find("no GEMM 5% faster on another method"), std::string::npos)
      << close.summary();
}

// The tries run on one step's inputs; the choice's own warm-up then draws the inputs a fixed
// method's warm-up would (so that it plans the same row counts), and the timed steps theirs.
TEST(GemmChoice, TriesRunOnTheFirstTrysInputs) {
  GemmMethodChoice c({"a", "b"}, 10);
  EXPECT_EQ(c.untimed_steps(), 20);
  EXPECT_EQ(c.input_step(0), 0);
  EXPECT_EQ(c.input_step(1), 1);
  for (int64_t s = 2; s < 10; ++s) EXPECT_EQ(c.input_step(s), 2) << s;  // the tries
  for (int64_t s = 10; s < 20; ++s) EXPECT_EQ(c.input_step(s), s - 10) << s;
  EXPECT_EQ(c.input_step(20), 10);  // timed steps draw their own
  EXPECT_EQ(c.input_step(25), 15);
}

// A warm-up shorter than the tries gets steps added before the timed ones; the timed steps draw
// the inputs they would have drawn without them.
TEST(GemmChoice, ShortWarmupGetsStepsAddedForTheTries) {
  GemmMethodChoice c({"a", "b", "c"}, 3);  // the default warm-up, three methods: ten tries
  ASSERT_TRUE(c.active());
  EXPECT_EQ(c.added_steps(), 10);  // 7 for the tries, 3 for the choice's own warm-up
  EXPECT_EQ(c.untimed_steps(), 13);
  for (int64_t s = 0; s < 6; ++s) {
    EXPECT_EQ(c.methods_for_step(s), all(std::string(1, char('a' + s % 3)))) << s;
    EXPECT_EQ(c.input_step(s), 0) << s;
    c.record(s, s == 4 ? 1.0 : 5.0, kNoTimes);
  }
  // No GEMM times: the mix is the base throughout.
  for (int64_t s = 6; s < 10; ++s) EXPECT_EQ(c.methods_for_step(s), all("b")) << s;
  EXPECT_EQ(c.methods_for_step(10), all("b"));  // the winner, before its own warm-up
  for (int64_t s = 10; s < 13; ++s) EXPECT_EQ(c.input_step(s), s - 10) << s;
  EXPECT_FALSE(c.methods_for_step(13));
  EXPECT_EQ(c.input_step(13), 3);  // the inputs of timed step 3 of a 3-step warm-up
  EXPECT_EQ(c.input_step(16), 6);
  for (int64_t warmup : {0, 1, 2, 3}) {
    const GemmMethodChoice two({"a", "b"}, warmup);
    EXPECT_EQ(two.untimed_steps(), 8 + warmup) << warmup;
    EXPECT_EQ(two.input_step(8 + warmup), warmup) << warmup;
  }
  EXPECT_EQ(GemmMethodChoice({"a", "b"}, 8).added_steps(), 8);
  EXPECT_EQ(GemmMethodChoice({"a", "b"}, 9).untimed_steps(), 18);
}

TEST(GemmChoice, NoChoiceWithOneMethodOrNone) {
  for (const GemmMethodChoice& none : {GemmMethodChoice({"only"}, 10), GemmMethodChoice({}, 3)}) {
    EXPECT_FALSE(none.active());
    EXPECT_EQ(none.added_steps(), 0);
    for (int64_t s = 0; s < 12; ++s) {
      EXPECT_FALSE(none.methods_for_step(s)) << s;
      EXPECT_FALSE(none.times_gemms(s)) << s;
      EXPECT_EQ(none.input_step(s), s) << s;
    }
    EXPECT_EQ(none.choice_name(), "");
    EXPECT_TRUE(none.tries_ms().empty());
  }
  EXPECT_EQ(GemmMethodChoice({"only"}, 10).untimed_steps(), 10);
}

TEST(GemmChoice, NonFiniteTimesNeverWin) {
  GemmMethodChoice c({"a", "b"}, 8);
  c.record(0, NAN, {0.5, NAN, INFINITY, 1, 1, 1});
  c.record(1, 3.0, kTimesB);
  EXPECT_EQ(c.methods_for_step(4), (ExpertGemmMethods{"a", "b", "b", "a", "a", "a"}));
  c.record(4, NAN, kNoTimes);  // the mix: no time
  c.record(5, 3.0, kNoTimes);
  EXPECT_EQ(c.choice_name(), "b");
}

}  // namespace
}  // namespace moe

namespace moe {
namespace {

// The result JSON gives the choice as fields, not the log's sentence: the method, each GEMM's,
// each try's ms and the plan counts, for jq and scripts.
TEST(GemmChoice, ResultJsonHasTheChoiceAsFields) {
  GemmMethodChoice c({"lt_multistream", "grouped_sm90"}, 8);
  record_steps(c, {12.5, 8.25, 13.0, 9.0, 8.0, 8.5, 8.1, 8.2},
               {kTimesA, kTimesB, kTimesA, kTimesB});
  RunResult r;
  r.backend = "cuda";
  r.mesh.world = 1;
  r.gemm.method = c.choice_name();
  r.gemm.methods = c.choice();
  r.gemm.warmup_experts_ms = c.tries_ms();
  r.gemm.warmup_gemm_ms = c.gemm_tries_ms();
  r.gemm.warmup_per_gemm = c.per_gemm_try();
  r.gemm.before_timed = {12, 11, 4};
  r.gemm.timed = {3, 2, 1};
  const nlohmann::json g = result_to_json(r).at("gemm");
  const nlohmann::json mix = {{"up", "lt_multistream"},      {"down", "lt_multistream"},
                              {"dgrad_a", "lt_multistream"}, {"dgrad_x", "grouped_sm90"},
                              {"wgrad_out", "grouped_sm90"}, {"wgrad_in", "grouped_sm90"}};
  EXPECT_EQ(g.at("method"), "per_gemm");
  EXPECT_EQ(g.at("methods"), mix);
  EXPECT_EQ(g.at("chosen_in_warmup"), true);
  EXPECT_EQ(g.at("added_warmup_steps"), 0);
  EXPECT_EQ(g.at("warmup_experts_ms"),
            nlohmann::json({{"lt_multistream", 12.5}, {"grouped_sm90", 8.25}}));
  EXPECT_EQ(g.at("warmup_gemm_ms").at("lt_multistream").at("wgrad_in"), 3.0);
  EXPECT_EQ(g.at("warmup_gemm_ms").at("grouped_sm90").at("up"), 2.0);
  EXPECT_EQ(g.at("warmup_per_gemm"), nlohmann::json({{"tried", true},
                                                     {"methods", mix},
                                                     {"against", "grouped_sm90"},
                                                     {"ms", 8.0},
                                                     {"against_ms", 8.2}}));
  EXPECT_EQ(g.at("plans_before_timed"), 12);
  EXPECT_EQ(g.at("heuristic_queries_before_timed"), 11);
  EXPECT_EQ(g.at("plans_timed"), 3);
  EXPECT_EQ(g.at("heuristic_queries_timed"), 2);
  EXPECT_EQ(g.at("tunings_before_timed"), 4);
  EXPECT_EQ(g.at("tunings_timed"), 1);
  EXPECT_FALSE(result_to_json(r).at("provenance").contains("gemm_method"));
}

// The summary's GEMM line counts the plans, queries and (gemm.algo tuned) the buckets tuned,
// before and in the timed steps.
TEST(GemmChoice, SummaryCountsPlansQueriesAndTunings) {
  RunResult r;
  r.backend = "cuda";
  r.mesh.world = 1;
  r.gemm.method = "lt_multistream";
  r.gemm.methods.fill("lt_multistream");
  r.gemm.before_timed = {63, 15, 14};
  r.gemm.timed = {18, 2, 1};
  auto summary_line = [&] {
    std::FILE* f = std::tmpfile();
    print_summary(r, f);
    std::rewind(f);
    char buf[4096];
    std::string line;
    while (std::fgets(buf, sizeof buf, f))
      if (std::string(buf).rfind("# expert GEMMs:", 0) == 0) line = buf;
    std::fclose(f);
    return line;
  };
  r.workload.gemm.algo = GemmAlgo::kTuned;
  EXPECT_NE(summary_line().find("63 plans, 15 heuristic queries, 14 buckets tuned before the "
                                "timed steps, 18, 2 and 1 in them"),
            std::string::npos)
      << summary_line();
  r.workload.gemm.algo = GemmAlgo::kAuto;
  EXPECT_NE(summary_line().find("63 plans, 15 heuristic queries before the timed steps, 18 and 2 "
                                "in them"),
            std::string::npos)
      << summary_line();
}

TEST(GemmChoice, ResultJsonWithoutAChoice) {
  RunResult r;  // the CPU backend: one way to run its GEMMs, no plans
  r.backend = "cpu";
  r.mesh.world = 1;
  const nlohmann::json g = result_to_json(r).at("gemm");
  EXPECT_TRUE(g.at("method").is_null());
  EXPECT_TRUE(g.at("methods").empty());
  EXPECT_EQ(g.at("chosen_in_warmup"), false);
  EXPECT_TRUE(g.at("warmup_experts_ms").empty());
  EXPECT_TRUE(g.at("warmup_gemm_ms").empty());
  EXPECT_TRUE(g.at("warmup_per_gemm").empty());
  EXPECT_EQ(g.at("plans_timed"), 0);
}

}  // namespace
}  // namespace moe
