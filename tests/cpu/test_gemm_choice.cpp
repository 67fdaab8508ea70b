// GemmMethodChoice: which warm-up steps try which method, and that the fastest try wins.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "app/gemm_choice.h"
#include "app/report.h"

namespace moe {
namespace {

TEST(GemmChoice, TriesEachMethodTwiceInTheLastWarmupSteps) {
  GemmMethodChoice c({"a", "b"}, 5);
  ASSERT_TRUE(c.active());
  EXPECT_EQ(c.method_for_step(0), "");  // the first warm-up step pays one-off costs, untried
  EXPECT_EQ(c.method_for_step(1), "a");
  EXPECT_EQ(c.method_for_step(2), "b");
  EXPECT_EQ(c.method_for_step(3), "a");
  EXPECT_EQ(c.method_for_step(4), "b");
  c.record(0, 1.0);  // not a try: ignored
  c.record(1, 9.0);
  c.record(2, 7.0);
  c.record(3, 6.0);  // a's better try
  c.record(4, 8.0);
  c.record(5, 0.5);  // a timed step: ignored
  EXPECT_EQ(c.winner(), "a");
  EXPECT_EQ(c.method_for_step(5), "a");
  EXPECT_EQ(c.method_for_step(6), "");  // set once: later timed steps keep it
  EXPECT_NE(c.summary().find("a (chosen in warm-up: a 6.00 ms, b 7.00 ms"), std::string::npos)
      << c.summary();
}

TEST(GemmChoice, TriesRunOnTheFirstTrysInputs) {
  GemmMethodChoice c({"a", "b"}, 6);
  EXPECT_EQ(c.input_step(0), 0);
  EXPECT_EQ(c.input_step(1), 1);
  for (int64_t s = 2; s < 6; ++s) EXPECT_EQ(c.input_step(s), 2) << s;  // the tries
  EXPECT_EQ(c.input_step(6), 6);                                       // timed steps draw their own
}

// A warm-up shorter than the tries gets steps added before the timed ones; the timed steps draw
// the inputs they would have drawn without them.
TEST(GemmChoice, ShortWarmupGetsStepsAddedForTheTries) {
  GemmMethodChoice c({"a", "b", "c"}, 3);  // the default warm-up, three methods: six tries
  ASSERT_TRUE(c.active());
  EXPECT_EQ(c.added_steps(), 3);
  EXPECT_EQ(c.untimed_steps(), 6);
  for (int64_t s = 0; s < 6; ++s) {
    EXPECT_EQ(c.method_for_step(s), std::string(1, char('a' + s % 3))) << s;
    EXPECT_EQ(c.input_step(s), 0) << s;
    c.record(s, s == 4 ? 1.0 : 5.0);
  }
  EXPECT_EQ(c.method_for_step(6), "b");  // the winner, before the first timed step
  EXPECT_EQ(c.input_step(6), 3);         // the inputs of timed step 3 of a 3-step warm-up
  EXPECT_EQ(c.input_step(9), 6);
  for (int64_t warmup : {0, 1, 2, 3}) {
    const GemmMethodChoice two({"a", "b"}, warmup);
    EXPECT_EQ(two.untimed_steps(), 4) << warmup;
    EXPECT_EQ(two.input_step(4), warmup) << warmup;
  }
  EXPECT_EQ(GemmMethodChoice({"a", "b"}, 4).added_steps(), 0);
  EXPECT_EQ(GemmMethodChoice({"a", "b"}, 9).untimed_steps(), 9);
}

TEST(GemmChoice, NoChoiceWithOneMethodOrNone) {
  for (const GemmMethodChoice& none : {GemmMethodChoice({"only"}, 10), GemmMethodChoice({}, 3)}) {
    EXPECT_FALSE(none.active());
    EXPECT_EQ(none.added_steps(), 0);
    for (int64_t s = 0; s < 12; ++s) {
      EXPECT_EQ(none.method_for_step(s), "") << s;
      EXPECT_EQ(none.input_step(s), s) << s;
    }
    EXPECT_EQ(none.winner(), "");
  }
  EXPECT_EQ(GemmMethodChoice({"only"}, 10).untimed_steps(), 10);
}

TEST(GemmChoice, NonFiniteTimesNeverWin) {
  GemmMethodChoice c({"a", "b"}, 4);
  c.record(0, NAN);
  c.record(1, 3.0);
  EXPECT_EQ(c.winner(), "b");
}

}  // namespace
}  // namespace moe

namespace moe {
namespace {

// The result JSON gives the choice as fields, not the log's sentence: the method, each try's ms
// and the plan counts, for jq and scripts.
TEST(GemmChoice, ResultJsonHasTheChoiceAsFields) {
  GemmMethodChoice c({"lt_multistream", "grouped_batched"}, 4);
  c.record(0, 12.5);
  c.record(1, 8.25);
  c.record(2, 13.0);
  c.record(3, 9.0);
  RunResult r;
  r.backend = "cuda";
  r.mesh.world = 1;
  r.gemm.method = c.winner();
  r.gemm.warmup_experts_ms = c.tries_ms();
  r.gemm.before_timed = {12, 11};
  r.gemm.timed = {3, 2};
  const nlohmann::json g = result_to_json(r).at("gemm");
  EXPECT_EQ(g.at("method"), "grouped_batched");
  EXPECT_EQ(g.at("chosen_in_warmup"), true);
  EXPECT_EQ(g.at("added_warmup_steps"), 0);
  EXPECT_EQ(g.at("warmup_experts_ms"),
            nlohmann::json({{"lt_multistream", 12.5}, {"grouped_batched", 8.25}}));
  EXPECT_EQ(g.at("plans_before_timed"), 12);
  EXPECT_EQ(g.at("heuristic_queries_before_timed"), 11);
  EXPECT_EQ(g.at("plans_timed"), 3);
  EXPECT_EQ(g.at("heuristic_queries_timed"), 2);
  EXPECT_FALSE(result_to_json(r).at("provenance").contains("gemm_method"));
}

TEST(GemmChoice, ResultJsonWithoutAChoice) {
  RunResult r;  // the CPU backend: one way to run its GEMMs, no plans
  r.backend = "cpu";
  r.mesh.world = 1;
  const nlohmann::json g = result_to_json(r).at("gemm");
  EXPECT_TRUE(g.at("method").is_null());
  EXPECT_EQ(g.at("chosen_in_warmup"), false);
  EXPECT_TRUE(g.at("warmup_experts_ms").empty());
  EXPECT_EQ(g.at("plans_timed"), 0);
}

}  // namespace
}  // namespace moe
