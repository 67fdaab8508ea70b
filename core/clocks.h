#pragma once
// The device's clocks and power while the timed steps run. A GPU at its power limit lowers its SM
// clocks a second or more into a load, and two GPUs of one host need not settle at the same
// clock: a step that is slower, or a rank that waits in a collective, may be the clocks' doing
// rather than the code's. Sampled in the background (the CUDA backend reads the driver's NVML
// library), summarized per rank here, reported by app/report.cpp.
#include <cstdint>
#include <string>
#include <vector>

#include "core/stats.h"

namespace moe {

// One reading: the SM clock, the board's power draw as the driver reports it, and whether the
// driver was holding the clocks down for power (software power cap, power brake) or heat.
struct ClockSample {
  double sm_mhz = 0;
  double power_w = 0;
  bool power_limited = false;
  bool thermal_limited = false;
};

// One rank's samples, summarized. samples = 0: none were taken (too short a run, or no source).
struct ClockSummary {
  int64_t samples = 0;
  Summary sm_mhz, power_w;
  double power_limit_w = 0;        // the limit the driver enforces (0 unknown)
  double power_limited_share = 0;  // of the samples
  double thermal_limited_share = 0;
};

ClockSummary summarize_clocks(const std::vector<ClockSample>& samples, double power_limit_w);

// The fixed-size form that travels to rank 0 in one gather, and back.
constexpr int kClockSummaryDoubles = 11;
void pack_clock_summary(const ClockSummary& s, double* out);
ClockSummary unpack_clock_summary(const double* in);

// The clocks as reported: each rank's summary, by world rank (samples 0 where a rank took none);
// no ranks, with why in why_none, where no rank took any.
struct ClocksReport {
  std::string source;  // where the readings came from ("NVML"); "" where none were taken
  std::string why_none;
  std::vector<ClockSummary> ranks;
};
// `ranks` read from `source` as a report; where none of them took a sample, none and `why_none`.
ClocksReport clocks_report(std::vector<ClockSummary> ranks, const std::string& source,
                           const std::string& why_none);

// How often a sampler reads the clocks while on.
constexpr int kClockSampleIntervalMs = 10;

// Reads the device's clocks every kClockSampleIntervalMs on a thread of its own while on (the
// timed steps, without the check or a dump), so that the step's own work is not disturbed.
class ClockSampler {
 public:
  virtual ~ClockSampler() = default;
  virtual void set_on(bool on) = 0;
  // The samples taken so far; stops sampling.
  virtual std::vector<ClockSample> finish() = 0;
  virtual double power_limit_w() const = 0;
  // Where the readings come from, for the report ("NVML").
  virtual std::string source() const = 0;
};

}  // namespace moe
