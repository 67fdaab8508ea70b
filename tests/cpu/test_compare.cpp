// moebench compare on synthetic results: ratios, the noise rule and --threshold, refusal of runs
// of different work and of files that are not results, the regression exit status, digests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/compare_command.h"
#include "core/error.h"

namespace moe {
namespace {

using nlohmann::json;

// {median, p10, p90} with (p90 - p10) / median = spread.
json stats(double median, double spread) {
  return {{"median", median},
          {"p10", median * (1 - spread / 2)},
          {"p90", median * (1 + spread / 2)},
          {"count", 20}};
}

// A result as `run --out` writes it, cut to the keys compare reads. Every time has spread 2%.
json make_result() {
  json phase_fwd = stats(4.0, 0.02);
  phase_fwd["in_step"] = true;
  json a2a = stats(1.0, 0.02);
  a2a["in_step"] = false;
  a2a["algbw_gbps"] = 100.0;
  a2a["busbw_gbps"] = 50.0;
  return {{"schema_version", 1},
          {"provenance",
           {{"git_commit", "0123456789abcdef"},
            {"git_dirty", false},
            {"backend", "cpu"},
            {"time_utc", "2026-11-22T00:00:00Z"}}},
          {"config",
           {{"name", "t"},
            {"model", {{"hidden", 64}, {"ffn", 32}, {"experts", 8}, {"topk", 2}}},
            {"router", {{"score", "softmax"}, {"scaling", 1.0}}},
            {"tokens_per_rank", 32},
            {"dtype", "bf16"},
            {"seed", 1},
            {"steps", 20},
            {"warmup", 3},
            {"check", "first"},
            {"mesh", {{"ep", 2}, {"fsdp", 2}}}}},
          {"mesh", {{"world", 4}, {"ep", 2}, {"fsdp", 2}}},
          {"timing",
           {{"unit", "ms"},
            {"warmup_steps", 3},
            {"timed_steps", 20},
            {"step", stats(10.0, 0.02)},
            {"phases", {{"experts_fwd", phase_fwd}, {"a2a_dispatch_fwd", a2a}}}}},
          {"throughput", {{"tokens_per_s", 1000.0}, {"tflops_per_rank", 2.0}}},
          {"memory", {{"high_water_bytes", 1 << 20}}},
          {"correctness", {{"checked", true}, {"pass", true}}},
          {"digests", {{"out", "aaaa"}, {"dx", "bbbb"}}}};
}

// Scales one stats object's median (keeping the given spread) and, for the step, the throughput
// that follows from it, as a real slower run would report.
void set_time(json& r, const std::string& stats_ptr, double factor, double spread = 0.02) {
  const double median = r.at(json::json_pointer(stats_ptr + "/median")).get<double>() * factor;
  json s = stats(median, spread);
  for (const auto& item : s.items())
    r[json::json_pointer(stats_ptr + "/" + item.key())] = item.value();
  if (stats_ptr == "/timing/step") {
    r["throughput"]["tokens_per_s"] = r["throughput"]["tokens_per_s"].get<double>() / factor;
    r["throughput"]["tflops_per_rank"] = r["throughput"]["tflops_per_rank"].get<double>() / factor;
  }
}

// A `moebench gemm --out` result cut to what compare reads: up and wgrad_in by grouped_sm90.
json make_gemm_result(double up_ms, double wgrad_ms) {
  return {{"command", "gemm"},
          {"config", {{"name", "g"}, {"tokens_per_rank", 32}, {"gemm", {{"sm90_cluster", 1}}}}},
          {"provenance", {{"git_commit", "0123456789abcdef"}, {"device", "H100"}}},
          {"workload", "g"},
          {"ep", 2},
          {"experts_local", 2},
          {"rows", {16, 48}},
          {"rows_from", "routed"},
          {"precision", "bf16"},
          {"iters", 20},
          {"gemms",
           {{{"gemm", "up"}, {"method", "grouped_sm90"}, {"median_ms", up_ms}},
            {{"gemm", "wgrad_in"}, {"method", "grouped_sm90"}, {"median_ms", wgrad_ms}}}}};
}

std::vector<CompareRun> runs_of(const std::vector<json>& results) {
  std::vector<CompareRun> runs;
  for (size_t i = 0; i < results.size(); ++i)
    runs.push_back({std::string(1, char('a' + i)) + ".json", results[i]});
  return runs;
}

const CompareRow& row(const std::vector<CompareRow>& rows, const std::string& metric) {
  for (const CompareRow& r : rows)
    if (r.metric == metric) return r;
  ADD_FAILURE() << "no row " << metric;
  static const CompareRow none;
  return none;
}

TEST(Compare, RatiosToA) {
  json b = make_result();
  set_time(b, "/timing/step", 1.25);
  set_time(b, "/timing/phases/experts_fwd", 0.5);
  const auto rows = build_rows(runs_of({make_result(), b}), -1, "all");
  const CompareRow& step = row(rows, "step");
  EXPECT_DOUBLE_EQ(step.values[0], 10.0);
  EXPECT_DOUBLE_EQ(step.values[1], 12.5);
  EXPECT_TRUE(std::isnan(step.ratio_to_a[0]));
  EXPECT_DOUBLE_EQ(step.ratio_to_a[1], 1.25);
  EXPECT_EQ(step.mark[1], "slower");
  EXPECT_DOUBLE_EQ(row(rows, "experts_fwd").ratio_to_a[1], 0.5);
  EXPECT_EQ(row(rows, "experts_fwd").mark[1], "faster");
  // Throughput: higher is better, so the lower throughput of a slower step reads "slower".
  EXPECT_DOUBLE_EQ(row(rows, "tokens_per_s").ratio_to_a[1], 0.8);
  EXPECT_EQ(row(rows, "tokens_per_s").mark[1], "slower");
  EXPECT_EQ(row(rows, "tflops_per_rank").mark[1], "slower");
  // A part of a phase is indented; its bandwidth has rows of its own.
  EXPECT_EQ(row(rows, " a2a_dispatch_fwd busbw").unit, "GB/s");
  EXPECT_EQ(row(rows, "high_water").mark[1], "");
  // Correctness is shown, never ratio'd or marked.
  const CompareRow& ok = row(rows, "correctness");
  EXPECT_EQ(ok.values[1], 1.0);
  EXPECT_TRUE(std::isnan(ok.ratio_to_a[1]));
  EXPECT_EQ(ok.mark[1], "");
}

TEST(Compare, NoiseRuleWithinSpreadIsNotMarked) {
  json a = make_result(), b = make_result();
  set_time(a, "/timing/step", 1.0, 0.20);  // A's steps spread 20% (p10 to p90)
  set_time(b, "/timing/step", 1.10);       // 10% slower, B tight: still within A's spread
  const CompareRow step = row(build_rows(runs_of({a, b}), -1, "all"), "step");
  EXPECT_NEAR(step.noise[1], 0.20, 1e-12);
  EXPECT_EQ(step.mark[1], "");
  // The larger spread counts whichever run has it.
  const CompareRow rev = row(build_rows(runs_of({b, a}), -1, "all"), "step");
  EXPECT_NEAR(rev.noise[1], 0.20, 1e-12);
  EXPECT_EQ(rev.mark[1], "");
}

TEST(Compare, NoiseRuleBeyondSpreadIsMarked) {
  json b = make_result(), c = make_result();
  set_time(b, "/timing/step", 1.10);  // both runs spread 2%
  set_time(c, "/timing/step", 0.90);
  const auto rows = build_rows(runs_of({make_result(), b, c}), -1, "all");
  const CompareRow& step = row(rows, "step");
  EXPECT_NEAR(step.noise[1], 0.02, 1e-12);
  EXPECT_EQ(step.mark[1], "slower");
  EXPECT_EQ(step.mark[2], "faster");
  EXPECT_EQ(row(rows, "experts_fwd").mark[1], "");  // unchanged phase
}

TEST(Compare, NoiseRuleIsSymmetricInRatio) {
  // Noise 150%: slower needs X/A > 2.5, faster X/A < 1/2.5 (a linear |X/A - 1| > 1.5 could never
  // mark a speed-up).
  json a = make_result(), b = make_result(), c = make_result();
  set_time(a, "/timing/step", 1.0, 1.5);
  set_time(b, "/timing/step", 0.5);
  set_time(c, "/timing/step", 0.2);
  const auto rows = build_rows(runs_of({a, b, c}), -1, "all");
  EXPECT_EQ(row(rows, "step").mark[1], "");
  EXPECT_EQ(row(rows, "step").mark[2], "faster");
  // Throughput, the step's inverse, marks alike.
  EXPECT_EQ(row(rows, "tokens_per_s").mark[1], "");
  EXPECT_EQ(row(rows, "tokens_per_s").mark[2], "faster");
}

TEST(Compare, NoiseFloorIsOnePercent) {
  json a = make_result(), b = make_result(), c = make_result();
  set_time(a, "/timing/step", 1.0, 0.0);
  set_time(b, "/timing/step", 1.005, 0.0);
  set_time(c, "/timing/step", 1.02, 0.0);
  const CompareRow step = row(build_rows(runs_of({a, b, c}), -1, "all"), "step");
  EXPECT_DOUBLE_EQ(step.noise[1], 0.01);
  EXPECT_EQ(step.mark[1], "");
  EXPECT_EQ(step.mark[2], "slower");
}

TEST(Compare, ThresholdReplacesTheNoiseRule) {
  json a = make_result(), b = make_result();
  set_time(a, "/timing/step", 1.0, 0.20);
  set_time(b, "/timing/step", 1.10, 0.20);
  // Within the 20% spread, but beyond a fixed 5%.
  CompareRow step = row(build_rows(runs_of({a, b}), 5, "all"), "step");
  EXPECT_DOUBLE_EQ(step.noise[1], 0.05);
  EXPECT_EQ(step.mark[1], "slower");
  // And a fixed 15% hides it even from tight runs.
  set_time(a, "/timing/step", 1.0, 0.0);
  set_time(b, "/timing/step", 1.0, 0.0);
  step = row(build_rows(runs_of({a, b}), 15, "all"), "step");
  EXPECT_EQ(step.mark[1], "");
  EXPECT_FALSE(has_regression(build_rows(runs_of({a, b}), 15, "all")));
}

TEST(Compare, RefusesDifferentWorkNamingTheKey) {
  json b = make_result();
  b["mesh"]["ep"] = 4;
  b["mesh"]["fsdp"] = 1;
  b["config"]["router"]["score"] = "sigmoid";
  const auto runs = runs_of({make_result(), b});
  const std::vector<std::string> diffs = work_differences(runs[0], runs[1]);
  ASSERT_EQ(diffs.size(), 3u);
  EXPECT_EQ(diffs[0], "config.router.score: \"softmax\" (a.json) vs \"sigmoid\" (b.json)");
  EXPECT_EQ(diffs[1], "mesh.ep: 2 (a.json) vs 4 (b.json)");
  try {
    check_same_work(runs);
    FAIL() << "different work accepted";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("mesh.ep: 2 (a.json) vs 4 (b.json)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("config.router.score"), std::string::npos) << msg;
  }
  // A key only one run has is a difference too.
  json c = make_result();
  c["config"]["router"]["new_knob"] = true;
  EXPECT_EQ(work_differences(runs[0], runs_of({c, c})[0]).size(), 1u);
}

TEST(Compare, AllowsDifferentNameStepsWarmupCheck) {
  json b = make_result();
  b["config"]["name"] = "other";
  b["config"]["steps"] = 50;
  b["config"]["warmup"] = 0;
  b["config"]["check"] = "off";
  b["config"]["router"]["scaling"] = 1;  // the same number written as an int
  EXPECT_NO_THROW(check_same_work(runs_of({make_result(), b})));
}

// Results from before the shared experts did none (make_result lacks their keys); a run with them
// did other work.
TEST(Compare, ResultsBeforeSharedExpertsHadNone) {
  json none = make_result();
  none["config"]["model"]["shared_experts"] = 0;
  none["config"]["model"]["shared_ffn"] = 0;
  EXPECT_NO_THROW(check_same_work(runs_of({make_result(), none})));
  json one = none;
  one["config"]["model"]["shared_experts"] = 1;
  one["config"]["model"]["shared_ffn"] = 32;
  const std::vector<std::string> diffs =
      work_differences(runs_of({make_result(), one})[0], runs_of({make_result(), one})[1]);
  ASSERT_EQ(diffs.size(), 2u);
  EXPECT_EQ(diffs[0], "config.model.shared_experts: 0 (a.json) vs 1 (b.json)");
}

TEST(Compare, RooflineKeyIsNotWork) {
  // A run with the calibration off, and one from before the key existed (make_result lacks it).
  json off = make_result();
  off["config"]["roofline"] = false;
  json on = make_result();
  on["config"]["roofline"] = true;
  EXPECT_NO_THROW(check_same_work(runs_of({make_result(), off, on})));
  // Floors and efficiencies are not compared: only medians, throughput and bandwidth are.
  on["timing"]["phases"]["experts_fwd"]["floor_ms"] = 1.0;
  on["timing"]["phases"]["experts_fwd"]["efficiency"] = 0.25;
  on["roofline"] = {{"done", true}, {"step_efficiency", 0.1}};
  const std::vector<CompareRow> rows = build_rows(runs_of({make_result(), on}), -1, "all");
  for (const CompareRow& r : rows) {
    EXPECT_EQ(r.metric.find("floor"), std::string::npos) << r.metric;
    EXPECT_EQ(r.metric.find("efficiency"), std::string::npos) << r.metric;
  }
  EXPECT_FALSE(has_regression(rows));
}

TEST(Compare, RefusesFilesThatAreNotResults) {
  auto message = [](const json& j) {
    try {
      check_result(j, "x.json");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(json{{"name", "tiny"}})
                .find("x.json is not a moebench result (no "
                      "schema_version)"),
            std::string::npos);
  EXPECT_NE(message(json::array()).find("x.json is not a moebench result"), std::string::npos);
  json v2 = make_result();
  v2["schema_version"] = 2;
  EXPECT_NE(message(v2).find("x.json has schema_version 2"), std::string::npos);
  json no_step = make_result();
  no_step["timing"].erase("step");
  EXPECT_NE(message(no_step).find("lacks timing/step/median"), std::string::npos);
  EXPECT_EQ(message(make_result()), "accepted");

  // From files: not JSON, and absent.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("moe_compare_" + std::to_string(::getpid()) + ".txt"))
                               .string();
  std::ofstream(path) << "not json\n";
  try {
    load_result(path);
    FAIL() << "non-JSON accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(path + " is not JSON"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
  EXPECT_THROW(load_result(path), UserError);
}

TEST(Compare, RegressionDecision) {
  json b = make_result(), c = make_result();
  set_time(b, "/timing/phases/experts_fwd", 0.5);  // B only faster
  EXPECT_FALSE(has_regression(build_rows(runs_of({make_result(), b}), -1, "all")));
  set_time(c, "/timing/phases/a2a_dispatch_fwd", 3.0);  // C: one part of a phase slower
  EXPECT_TRUE(has_regression(build_rows(runs_of({make_result(), b, c}), -1, "all")));
  EXPECT_TRUE(has_regression(build_rows(runs_of({make_result(), b, c}), -1, "timing")));
  // A throughput alone (as an edited file may have it) is a regression too.
  json d = make_result();
  d["throughput"]["tokens_per_s"] = 500.0;
  EXPECT_TRUE(has_regression(build_rows(runs_of({make_result(), d}), -1, "all")));
  // More memory, a failed check or different digests are reported, not regressions.
  json e = make_result();
  e["memory"]["high_water_bytes"] = 4 << 20;
  e["correctness"]["pass"] = false;
  e["digests"]["dx"] = "cccc";
  const auto rows = build_rows(runs_of({make_result(), e}), -1, "all");
  EXPECT_EQ(row(rows, "high_water").mark[1], "more");
  EXPECT_FALSE(has_regression(rows));
}

TEST(Compare, CommandExitStatus) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("moe_compare_" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(dir);
  json slow = make_result(), other = make_result();
  set_time(slow, "/timing/step", 3.0);
  other["mesh"]["ep"] = 4;
  std::ofstream(dir + "/a.json") << make_result().dump();
  std::ofstream(dir + "/slow.json") << slow.dump();
  std::ofstream(dir + "/other.json") << other.dump();
  CompareOptions opt;
  opt.files = {dir + "/a.json", dir + "/slow.json"};
  testing::internal::CaptureStdout();
  EXPECT_EQ(compare_command(opt), 0);  // reported, but not asked to fail
  opt.fail_on_regression = true;
  EXPECT_EQ(compare_command(opt), 1);
  opt.files = {dir + "/a.json", dir + "/a.json"};
  EXPECT_EQ(compare_command(opt), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("# slower than A beyond the noise: B: step x3.000"), std::string::npos) << out;
  EXPECT_NE(out.find("# digests: bitwise identical results"), std::string::npos) << out;
  opt.files = {dir + "/a.json", dir + "/other.json"};
  EXPECT_EQ(compare_command(opt), 2);
  opt.files = {dir + "/a.json", dir + "/missing.json"};
  EXPECT_EQ(compare_command(opt), 2);
  // A GEMM table beside a run's result: refused even when different work is allowed; two tables,
  // one 15% slower, fail as runs do.
  std::ofstream(dir + "/gemm.json") << make_gemm_result(2.0, 4.0).dump();
  std::ofstream(dir + "/gemm_slow.json") << make_gemm_result(2.3, 4.0).dump();
  opt.files = {dir + "/a.json", dir + "/gemm.json"};
  opt.allow_different_work = true;
  EXPECT_EQ(compare_command(opt), 2);
  opt.files = {dir + "/gemm.json", dir + "/gemm_slow.json"};
  opt.allow_different_work = false;
  testing::internal::CaptureStdout();
  EXPECT_EQ(compare_command(opt), 1);
  const std::string gemm_out = testing::internal::GetCapturedStdout();
  EXPECT_NE(gemm_out.find("B: up grouped_sm90 x1.150"), std::string::npos) << gemm_out;
  std::filesystem::remove_all(dir);
}

TEST(Compare, MissingPhaseAndTimingOnly) {
  json b = make_result();
  b["timing"]["phases"].erase("experts_fwd");  // e.g. a later commit renamed the phase
  const auto rows = build_rows(runs_of({make_result(), b}), -1, "timing");
  const CompareRow& fwd = row(rows, "experts_fwd");
  EXPECT_TRUE(std::isnan(fwd.values[1]));
  EXPECT_TRUE(std::isnan(fwd.ratio_to_a[1]));
  EXPECT_EQ(fwd.mark[1], "");
  for (const CompareRow& r : rows) EXPECT_EQ(r.kind, MetricKind::kTime) << r.metric;
  EXPECT_EQ(rows.back().metric, "step");
}

TEST(Compare, DigestsAndTable) {
  json b = make_result(), c = make_result();
  c["digests"]["dx"] = "cccc";
  EXPECT_EQ(digest_summary(runs_of({make_result(), b})), "bitwise identical results");
  const std::string line = digest_summary(runs_of({make_result(), b, c}));
  EXPECT_NE(line.find("B bitwise identical to A; C differs from A in dx"), std::string::npos)
      << line;
  // Digests of different functions are never compared, whatever their values.
  json d = make_result();
  d["digest_function"] = "mixsum64";
  const std::string other = digest_summary(runs_of({make_result(), b, d}));
  EXPECT_NE(other.find("C not comparable (digests by mixsum64, A's by fnv1a64)"), std::string::npos)
      << other;
  EXPECT_EQ(other.find("bitwise identical results"), std::string::npos) << other;
  // Another expert placement moves the experts' gradients between ranks, so their digests.
  json placed = make_result();
  placed["config"]["expert_placement"] = "balanced";
  placed["digests"]["dw_in"] = "dddd";
  const std::string moved = digest_summary(runs_of({make_result(), placed}));
  EXPECT_NE(moved.find("B differs from A in dw_in"), std::string::npos) << moved;
  EXPECT_NE(moved.find("note: the runs place the experts differently (expert_placement)"),
            std::string::npos)
      << moved;
  EXPECT_EQ(line.find("expert_placement"), std::string::npos) << line;
  // gemm.method auto chooses per run, and methods may sum in other orders: the note names
  // both runs' methods; equal methods, or results without them, get none.
  auto with_methods = [](const std::string& up) {
    json r = make_result();
    for (const char* g : {"up", "down", "dgrad_a", "dgrad_x", "wgrad_out", "wgrad_in"})
      r["gemm"]["methods"][g] = "grouped_sm90";
    r["gemm"]["methods"]["up"] = up;
    return r;
  };
  json mixed = with_methods("lt_multistream");
  mixed["digests"]["out"] = "eeee";
  const std::string methods =
      digest_summary(runs_of({with_methods("grouped_sm90"), with_methods("grouped_sm90"), mixed}));
  EXPECT_NE(methods.find("note: the runs multiply with different GEMM methods (A: grouped_sm90; "
                         "C: dgrad_a grouped_sm90, dgrad_x grouped_sm90, down grouped_sm90, up "
                         "lt_multistream, wgrad_in grouped_sm90, wgrad_out grouped_sm90), which "
                         "may sum in other orders: pin gemm.method to compare bits"),
            std::string::npos)
      << methods;
  EXPECT_EQ(digest_summary(runs_of({with_methods("grouped_sm90"), with_methods("grouped_sm90")})),
            "bitwise identical results");
  EXPECT_EQ(line.find("GEMM methods"), std::string::npos) << line;
  const auto runs = runs_of({make_result(), c});
  const std::string table = render_table(runs, build_rows(runs, -1, "all"), -1);
  EXPECT_NE(table.find("# A  a.json: commit 0123456789ab, backend cpu"), std::string::npos)
      << table;
  EXPECT_NE(table.find("at least 1%"), std::string::npos);
  EXPECT_NE(table.find("\n  step "), std::string::npos) << table;
  EXPECT_NE(render_table(runs, build_rows(runs, 5, "all"), 5).find("beyond 5% (--threshold)"),
            std::string::npos);
  EXPECT_EQ(table.find("profiled"), std::string::npos) << table;
  json profiled = make_result();
  profiled["provenance"]["profile"] = true;
  const auto with_profiled = runs_of({make_result(), profiled});
  const std::string marked = render_table(with_profiled, build_rows(with_profiled, -1, "all"), -1);
  EXPECT_NE(marked.find("profiled (--profile)\n"), std::string::npos) << marked;
}

// A result's timing.clocks with one entry per rank's median SM clock.
json clocks_of(const std::vector<double>& mhz) {
  json ranks = json::array();
  for (size_t i = 0; i < mhz.size(); ++i)
    ranks.push_back({{"rank", int(i)}, {"samples", 100}, {"sm_mhz", {{"median", mhz[i]}}}});
  return {{"source", "NVML"}, {"ranks", ranks}};
}

TEST(Compare, NotesRunsAtOtherClocks) {
  json a = make_result(), near = make_result(), far = make_result(), none = make_result();
  a["timing"]["clocks"] = clocks_of({1500, 1600});
  near["timing"]["clocks"] = clocks_of({1530, 1700});  // slowest ranks 1500 and 1530: 2%
  far["timing"]["clocks"] = clocks_of({1800, 1400});   // 1400: 7% lower
  auto table = [](const std::vector<json>& results) {
    const auto runs = runs_of(results);
    return render_table(runs, build_rows(runs, -1, "all"), -1);
  };
  const std::string quiet = table({a, near, none});
  EXPECT_EQ(quiet.find("GPUs ran at"), std::string::npos) << quiet;
  const std::string noted = table({a, far});
  EXPECT_NE(noted.find("# note: B's GPUs ran at 1400 MHz against A's 1500"), std::string::npos)
      << noted;
  // The sm_clock row: the slowest ranks' clocks, marked beyond 3%, "-" where a run has none.
  const auto rows = build_rows(runs_of({a, near, far, none}), -1, "all");
  const CompareRow& clock = row(rows, "sm_clock");
  EXPECT_EQ(clock.unit, "MHz");
  EXPECT_DOUBLE_EQ(clock.values[0], 1500);
  EXPECT_DOUBLE_EQ(clock.values[1], 1530);
  EXPECT_DOUBLE_EQ(clock.values[2], 1400);
  EXPECT_TRUE(std::isnan(clock.values[3]));
  EXPECT_EQ(clock.mark[1], "");
  EXPECT_EQ(clock.mark[2], "less");
}

TEST(Compare, GemmResultsByGemmAndMethod) {
  json a = make_gemm_result(2.0, 4.0), b = make_gemm_result(2.3, 4.1);
  b["gemms"].push_back({{"gemm", "up"}, {"method", "lt_multistream"}, {"median_ms", 3.0}});
  b["config"]["gemm"]["sm90_cluster"] = 2;  // a GEMM knob: the same work
  const auto runs = runs_of({a, b});
  EXPECT_TRUE(work_differences(runs[0], runs[1]).empty());
  const auto rows = build_rows(runs, -1, "all");
  // Beyond the 5% a GEMM median is given: 2.3 / 2.0 slower, 4.1 / 4.0 within it.
  EXPECT_EQ(row(rows, "up grouped_sm90").mark[1], "slower");
  EXPECT_EQ(row(rows, "wgrad_in grouped_sm90").mark[1], "");
  EXPECT_TRUE(std::isnan(row(rows, "up lt_multistream").values[0]));
  EXPECT_TRUE(has_regression(rows));
  EXPECT_EQ(row(build_rows(runs, 20, "all"), "up grouped_sm90").mark[1], "");
  const std::string table = render_table(runs, rows, -1);
  EXPECT_NE(table.find("2 moebench gemm results"), std::string::npos) << table;
  EXPECT_NE(table.find("2 local experts x 16-48 rows (mean 32.0, routed)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("a change counts beyond 5%"), std::string::npos) << table;
  EXPECT_EQ(table.find("digests"), std::string::npos) << table;
}

// The totals as `moebench gemm` writes them (app/gemm_totals.h): bf16 by one method, and an FP8
// recipe whose method names carry the recipe.
json with_totals(json r, double bf16_ms, double fp8_ms) {
  r["totals"] = {
      {{"precision", "bf16"},
       {"methods", {{"grouped_sm90", {{"ms", bf16_ms}, {"quantize_ms", 0}, {"gemms", 6}}}}},
       {"fastest_each", {{"ms", bf16_ms}, {"quantize_ms", 0}, {"gemms", 6}}},
       {"speedup_vs_bf16", nullptr}},
      {{"precision", "fp8_tensor"},
       {"methods",
        {{"fp8_tensor:grouped_sm90", {{"ms", fp8_ms}, {"quantize_ms", 0.5}, {"gemms", 6}}}}},
       {"fastest_each", {{"ms", fp8_ms}, {"quantize_ms", 0.5}, {"gemms", 6}}},
       {"speedup_vs_bf16", bf16_ms / fp8_ms}}};
  return r;
}

TEST(Compare, GemmTotalsPerMethodAndFastestOfEach) {
  const json a = with_totals(make_gemm_result(2.0, 4.0), 10.0, 7.0);
  const json b = with_totals(make_gemm_result(2.0, 4.0), 11.0, 7.1);
  const json old = make_gemm_result(2.0, 4.0);  // written before the totals
  const auto runs = runs_of({a, b, old});
  const auto rows = build_rows(runs, -1, "all");
  const CompareRow& bf16 = row(rows, "totals bf16 grouped_sm90");
  EXPECT_DOUBLE_EQ(bf16.values[1], 11.0);
  EXPECT_EQ(bf16.mark[1], "slower");  // 10% against the 5% a GEMM time is given
  EXPECT_TRUE(std::isnan(bf16.values[2]));
  EXPECT_EQ(row(rows, "totals bf16 fastest of each").mark[1], "slower");
  const CompareRow& fp8 = row(rows, "totals fp8_tensor fp8_tensor:grouped_sm90");
  EXPECT_DOUBLE_EQ(fp8.values[0], 7.0);
  EXPECT_EQ(fp8.mark[1], "");  // 1.4%: within it
  EXPECT_DOUBLE_EQ(row(rows, "totals fp8_tensor fastest of each").values[1], 7.1);
  // After the GEMMs' own rows, before the clocks; none where no run has totals.
  const auto at = [&](const std::string& m) {
    for (size_t i = 0; i < rows.size(); ++i)
      if (rows[i].metric == m) return i;
    return rows.size();
  };
  EXPECT_LT(at("wgrad_in grouped_sm90"), at("totals bf16 grouped_sm90"));
  EXPECT_LT(at("totals bf16 grouped_sm90"), at("totals bf16 fastest of each"));
  EXPECT_LT(at("totals bf16 fastest of each"), at("totals fp8_tensor fp8_tensor:grouped_sm90"));
  // A method's name is a key, read as one even where it holds a JSON pointer's '/' or '~'.
  json odd = a;
  odd["totals"][0]["methods"] = {{"lt/x~1", {{"ms", 9.0}, {"quantize_ms", 0}, {"gemms", 6}}}};
  EXPECT_DOUBLE_EQ(row(build_rows(runs_of({odd, odd}), -1, "all"), "totals bf16 lt/x~1").values[0],
                   9.0);
  for (const CompareRow& r : build_rows(runs_of({old, old}), -1, "all"))
    EXPECT_EQ(r.metric.rfind("totals", 0), std::string::npos) << r.metric;
}

TEST(Compare, GemmResultsOfOtherWorkOrKindAreRefused) {
  json a = make_gemm_result(2.0, 4.0), rows = make_gemm_result(2.0, 4.0);
  rows["rows"] = {16, 16, 64};
  auto diffs = work_differences(runs_of({a, rows})[0], runs_of({a, rows})[1]);
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_NE(diffs[0].find("rows: 2 experts of 16-48 rows, 64 in all"), std::string::npos)
      << diffs[0];
  diffs = work_differences(runs_of({a, make_result()})[0], runs_of({a, make_result()})[1]);
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_NE(diffs[0].find("kind: a moebench gemm result"), std::string::npos) << diffs[0];
  json zero = make_gemm_result(0.0, 4.0);
  EXPECT_THROW(check_result(zero, "zero.json"), UserError);
  json empty = make_gemm_result(2.0, 4.0);
  empty["gemms"] = json::array();
  EXPECT_THROW(check_result(empty, "empty.json"), UserError);
  EXPECT_NO_THROW(check_result(a, "a.json"));
}

}  // namespace
}  // namespace moe
