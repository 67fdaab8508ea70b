#pragma once
// What each lane of a step did, measured from its timer's intervals (core/device.h): how long
// each lane was busy, and how much of the communication ran with the other lane idle, i.e.
// stayed exposed rather than hidden behind work beside it.
#include <vector>

#include "core/device.h"

namespace moe {

struct LaneTimes {
  // Per lane: the union of its in-step phases' stretches (a phase nested in another counts once).
  double busy_ms[kNumLanes] = {};
  // The union of the communication phases' stretches, and the part of it during which no other
  // lane was busy. A schedule that runs everything on one lane exposes all of it.
  double comm_ms = 0, exposed_comm_ms = 0;
};

// intervals: one step's, as PhaseTimer::intervals() gives them. Phases below num_step_phases
// are in-step (they occupy their lane); comm_phases are the communication whose exposure counts.
LaneTimes lane_times(const std::vector<PhaseInterval>& intervals, int num_step_phases,
                     const std::vector<int>& comm_phases);

}  // namespace moe
