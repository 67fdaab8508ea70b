#include "core/lane_times.h"

#include <algorithm>
#include <utility>

namespace moe {
namespace {

using Span = std::pair<double, double>;  // [begin, end) ms

// Sorted, disjoint spans covering the same time as `spans`.
std::vector<Span> merged(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<Span> out;
  for (const Span& s : spans) {
    if (s.second <= s.first) continue;
    if (!out.empty() && s.first <= out.back().second)
      out.back().second = std::max(out.back().second, s.second);
    else
      out.push_back(s);
  }
  return out;
}

double length(const std::vector<Span>& spans) {
  double ms = 0;
  for (const Span& s : spans) ms += s.second - s.first;
  return ms;
}

// The time of `a` covered by `b`, both merged.
double overlap(const std::vector<Span>& a, const std::vector<Span>& b) {
  double ms = 0;
  size_t j = 0;
  for (const Span& s : a) {
    while (j < b.size() && b[j].second <= s.first) ++j;
    for (size_t k = j; k < b.size() && b[k].first < s.second; ++k)
      ms += std::min(s.second, b[k].second) - std::max(s.first, b[k].first);
  }
  return ms;
}

}  // namespace

LaneTimes lane_times(const std::vector<PhaseInterval>& intervals, int num_step_phases,
                     const std::vector<int>& comm_phases) {
  std::vector<Span> busy[kNumLanes], comm[kNumLanes];
  for (const PhaseInterval& i : intervals) {
    const Span s{i.begin_ms, i.end_ms};
    if (i.phase < num_step_phases) busy[i.lane].push_back(s);
    if (std::find(comm_phases.begin(), comm_phases.end(), i.phase) != comm_phases.end())
      comm[i.lane].push_back(s);
  }
  LaneTimes t;
  for (int lane = 0; lane < kNumLanes; ++lane) {
    busy[lane] = merged(std::move(busy[lane]));
    t.busy_ms[lane] = length(busy[lane]);
  }
  for (int lane = 0; lane < kNumLanes; ++lane) {
    const std::vector<Span> mine = merged(std::move(comm[lane]));
    const double ms = length(mine);
    t.comm_ms += ms;
    // Two lanes: what hides this lane's communication is the other lane's work.
    t.exposed_comm_ms += ms - overlap(mine, busy[kNumLanes - 1 - lane]);
  }
  return t;
}

}  // namespace moe
