// The report's "# ranks:" line (app/report.cpp): with several ranks, the three in-step phases
// whose rank spread (the slowest rank's ms less the fastest's) is largest, largest first; parts of
// phases and phases that do not differ are left out; nothing from one rank. And rank_spread in
// every phase of the result JSON.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "app/report.h"

namespace moe {
namespace {

PhaseResult phase(const std::string& name, double spread, bool in_step = true) {
  PhaseResult p;
  p.name = name;
  p.ms.median = 1.0;
  p.rank_spread.median = spread;
  p.in_step = in_step;
  return p;
}

RunResult result(int world) {
  RunResult r;
  r.backend = "cpu";
  r.mesh.world = world;
  r.mesh.ep = world;
  r.step_ms.median = 5.0;
  r.phases = {phase("router_fwd", 0.0),
              phase("experts_fwd", 0.2),
              phase("combine_fwd", 0.15),
              phase("experts_bwd", 0.4),
              phase("dispatch_bwd", 0.35),
              phase("grad_sync", 0.01),
              phase("a2a_dispatch_bwd", 0.9, false)};
  return r;
}

// The lines print_summary writes that start with `prefix`.
std::string lines_starting(const RunResult& r, const std::string& prefix) {
  std::FILE* f = std::tmpfile();
  print_summary(r, f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, f))
    if (std::string(buf).rfind(prefix, 0) == 0) out += buf;
  std::fclose(f);
  return out;
}

TEST(ReportRanks, NamesTheThreePhasesThatDifferMostLargestFirst) {
  const std::string line = lines_starting(result(2), "# ranks:");
  ASSERT_FALSE(line.empty());
  const size_t bwd = line.find("experts_bwd 0.400"), disp = line.find("dispatch_bwd 0.350"),
               fwd = line.find("experts_fwd 0.200");
  ASSERT_NE(bwd, std::string::npos) << line;
  ASSERT_NE(disp, std::string::npos) << line;
  ASSERT_NE(fwd, std::string::npos) << line;
  EXPECT_LT(bwd, disp);
  EXPECT_LT(disp, fwd);
  EXPECT_EQ(line.find("combine_fwd"), std::string::npos) << line;       // fourth
  EXPECT_EQ(line.find("a2a_dispatch_bwd"), std::string::npos) << line;  // a part of a phase
}

TEST(ReportRanks, NoLineFromOneRankOrWhereNoPhaseDiffers) {
  EXPECT_EQ(lines_starting(result(1), "# ranks:"), "");
  RunResult even = result(2);
  for (PhaseResult& p : even.phases) p.rank_spread.median = 0.0;
  EXPECT_EQ(lines_starting(even, "# ranks:"), "");
}

TEST(ReportRanks, EveryPhaseHasItsRankSpreadInTheJson) {
  const nlohmann::json ph = result_to_json(result(2)).at("timing").at("phases");
  for (const PhaseResult& p : result(2).phases)
    EXPECT_EQ(ph.at(p.name).at("rank_spread").at("median"), p.rank_spread.median) << p.name;
}

}  // namespace
}  // namespace moe
