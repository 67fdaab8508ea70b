// GemmMethodChoice: which warm-up steps try which method, and that the fastest try wins.
#include <gtest/gtest.h>

#include <cmath>

#include "app/gemm_choice.h"

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

TEST(GemmChoice, OneTryEachWithAShortWarmupAndNoneWithLess) {
  GemmMethodChoice c({"a", "b"}, 3);
  ASSERT_TRUE(c.active());
  EXPECT_EQ(c.method_for_step(0), "");
  EXPECT_EQ(c.method_for_step(1), "a");
  EXPECT_EQ(c.method_for_step(2), "b");
  c.record(1, 5.0);
  c.record(2, 4.0);
  EXPECT_EQ(c.winner(), "b");

  GemmMethodChoice none({"a", "b"}, 1);
  EXPECT_FALSE(none.active());
  EXPECT_EQ(none.method_for_step(0), "");
  EXPECT_EQ(none.method_for_step(1), "");
  EXPECT_EQ(none.winner(), "");
  EXPECT_FALSE(GemmMethodChoice({"only"}, 10).active());
  EXPECT_FALSE(GemmMethodChoice({}, 10).active());
}

TEST(GemmChoice, NonFiniteTimesNeverWin) {
  GemmMethodChoice c({"a", "b"}, 2);
  c.record(0, NAN);
  c.record(1, 3.0);
  EXPECT_EQ(c.winner(), "b");
}

}  // namespace
}  // namespace moe
