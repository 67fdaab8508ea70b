#include "core/clocks.h"

#include <algorithm>

namespace moe {

ClockSummary summarize_clocks(const std::vector<ClockSample>& samples, double power_limit_w) {
  ClockSummary s;
  s.power_limit_w = power_limit_w;
  s.samples = int64_t(samples.size());
  if (samples.empty()) return s;
  std::vector<double> mhz, watts;
  int64_t power = 0, thermal = 0;
  for (const ClockSample& c : samples) {
    mhz.push_back(c.sm_mhz);
    watts.push_back(c.power_w);
    power += c.power_limited;
    thermal += c.thermal_limited;
  }
  s.sm_mhz = summarize(mhz);
  s.power_w = summarize(watts);
  s.power_limited_share = double(power) / double(s.samples);
  s.thermal_limited_share = double(thermal) / double(s.samples);
  return s;
}

void pack_clock_summary(const ClockSummary& s, double* out) {
  const double v[kClockSummaryDoubles] = {
      double(s.samples), s.sm_mhz.median,       s.sm_mhz.p10,           s.sm_mhz.p90,
      s.sm_mhz.min,      s.sm_mhz.max,          s.power_w.median,       s.power_w.max,
      s.power_limit_w,   s.power_limited_share, s.thermal_limited_share};
  for (int i = 0; i < kClockSummaryDoubles; ++i) out[i] = v[i];
}

ClockSummary unpack_clock_summary(const double* in) {
  ClockSummary s;
  s.samples = int64_t(in[0]);
  s.sm_mhz.count = s.power_w.count = int(s.samples);
  s.sm_mhz.median = in[1];
  s.sm_mhz.p10 = in[2];
  s.sm_mhz.p90 = in[3];
  s.sm_mhz.min = in[4];
  s.sm_mhz.max = in[5];
  s.power_w.median = in[6];
  s.power_w.max = in[7];
  s.power_limit_w = in[8];
  s.power_limited_share = in[9];
  s.thermal_limited_share = in[10];
  return s;
}

ClocksReport clocks_report(std::vector<ClockSummary> ranks, const std::string& source,
                           const std::string& why_none) {
  ClocksReport c;
  if (std::any_of(ranks.begin(), ranks.end(),
                  [](const ClockSummary& k) { return k.samples > 0; })) {
    c.source = source;
    c.ranks = std::move(ranks);
  } else {
    c.why_none = why_none;
  }
  return c;
}

}  // namespace moe
