// The lanes' figures (core/lane_times.h) from hand-made intervals, and the CPU timer's intervals:
// summed per phase, labelled with the lane the device had current.
#include <gtest/gtest.h>

#include <vector>

#include "core/lane_times.h"
#include "kernels/cpu/cpu_device.h"

namespace moe {
namespace {

enum : int { kWork, kComm, kOther, kNumStep, kPart = kNumStep };

TEST(LaneTimes, BusyIsTheUnionOfEachLanesStretches) {
  // Main: work [0, 4) with another phase nested in it, work [6, 8); side: comm [3, 7), holding
  // the communication proper [3.5, 6.5).
  const std::vector<PhaseInterval> iv = {{kWork, kMainLane, 0, 4},
                                         {kOther, kMainLane, 1, 2},
                                         {kWork, kMainLane, 6, 8},
                                         {kComm, kSideLane, 3, 7},
                                         {kPart, kSideLane, 3.5, 6.5}};
  const LaneTimes t = lane_times(iv, kNumStep, {kPart});
  EXPECT_DOUBLE_EQ(t.busy_ms[kMainLane], 6);
  EXPECT_DOUBLE_EQ(t.busy_ms[kSideLane], 4);
  // The side's part [3.5, 6.5) is hidden by main's work over [3.5, 4), exposed over [4, 6) and
  // hidden again over [6, 6.5).
  EXPECT_DOUBLE_EQ(t.comm_ms, 3);
  EXPECT_DOUBLE_EQ(t.exposed_comm_ms, 2);
}

TEST(LaneTimes, OneLaneExposesAllItsCommunication) {
  const std::vector<PhaseInterval> iv = {{kWork, kMainLane, 0, 2},
                                         {kComm, kMainLane, 2, 5},
                                         {kPart, kMainLane, 2.5, 4.5},
                                         {kPart, kMainLane, 4.5, 5}};
  const LaneTimes t = lane_times(iv, kNumStep, {kPart});
  EXPECT_DOUBLE_EQ(t.busy_ms[kMainLane], 5);
  EXPECT_DOUBLE_EQ(t.busy_ms[kSideLane], 0);
  EXPECT_DOUBLE_EQ(t.comm_ms, 2.5);
  EXPECT_DOUBLE_EQ(t.exposed_comm_ms, 2.5);
  EXPECT_DOUBLE_EQ(lane_times({}, kNumStep, {kPart}).comm_ms, 0);
}

TEST(LaneTimes, FullyHiddenCommunication) {
  const std::vector<PhaseInterval> iv = {{kWork, kMainLane, 0, 10},
                                         {kOther, kSideLane, 1, 3},
                                         {kPart, kSideLane, 1, 3},
                                         {kPart, kSideLane, 5, 9}};
  const LaneTimes t = lane_times(iv, kNumStep, {kPart});
  EXPECT_DOUBLE_EQ(t.comm_ms, 6);
  EXPECT_DOUBLE_EQ(t.exposed_comm_ms, 0);
}

// The CPU device runs both lanes in turn but labels each stretch with its lane, and a phase begun
// twice in a step sums its stretches.
TEST(LaneTimes, CpuTimerLabelsLanesAndSumsStretches) {
  CpuDevice device(DType::kFp32);
  std::unique_ptr<PhaseTimer> t = device.make_timer({"work", "comm", "other"});
  t->begin(kWork);
  t->end(kWork);
  device.fork_side();
  t->begin(kComm);
  t->end(kComm);
  device.to_main();
  t->begin(kWork);
  t->end(kWork);
  const std::vector<double> ms = t->read();
  const std::vector<PhaseInterval>& iv = t->intervals();
  ASSERT_EQ(iv.size(), 3u);
  EXPECT_EQ(iv[0].lane, kMainLane);
  EXPECT_EQ(iv[1].lane, kSideLane);
  EXPECT_EQ(iv[1].phase, kComm);
  EXPECT_EQ(iv[2].lane, kMainLane);
  EXPECT_EQ(iv[0].begin_ms, 0.0);
  for (size_t i = 1; i < iv.size(); ++i) EXPECT_GE(iv[i].begin_ms, iv[i - 1].end_ms);
  EXPECT_DOUBLE_EQ(ms[kWork], (iv[0].end_ms - iv[0].begin_ms) + (iv[2].end_ms - iv[2].begin_ms));
  EXPECT_EQ(ms[kOther], 0.0);
  // The next step starts afresh.
  t->begin(kOther);
  t->end(kOther);
  EXPECT_EQ(t->read()[kWork], 0.0);
  ASSERT_EQ(t->intervals().size(), 1u);
  EXPECT_EQ(t->intervals()[0].phase, kOther);
}

}  // namespace
}  // namespace moe
