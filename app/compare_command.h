#pragma once
// `moebench compare A.json B.json [C.json ...]`: the result JSON of runs of the same work, side by
// side, each value against A's, with changes marked only where they exceed the runs' own noise.
// The pieces are plain functions on nlohmann::json so that the unit tests need no files or CLI.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace moe {

struct CompareOptions {
  std::vector<std::string> files;  // A first: every other run is compared with it
  double threshold_pct = -1;       // < 0: noise from the runs' spreads; else a fixed percentage
  bool fail_on_regression = false;
  std::string metrics = "all";        // all | timing (step and phase times only)
  bool allow_different_work = false;  // compare anyway, naming the differing keys
};

// One loaded result: `name` is what messages and the table call it (the file path).
struct CompareRun {
  std::string name;
  nlohmann::json result;
};

// What a row measures decides which way is better and whether it can be a regression.
enum class MetricKind {
  kTime,    // lower is better: "slower" / "faster"; a regression when slower
  kRate,    // higher is better (throughput, bandwidth): "slower" when lower; a regression then
  kInfo,    // "more" / "less"; informational (memory, the GPUs' clocks)
  kStatus,  // correctness: 1 pass, 0 fail, NaN not checked; shown, never ratio'd or marked
};

struct CompareRow {
  std::string metric;  // e.g. "step", "experts_fwd", "  a2a_dispatch_fwd busbw"
  std::string unit;    // ms, tokens/s, TFLOP/s, GB/s, MiB, ""
  MetricKind kind = MetricKind::kTime;
  std::vector<double> values;      // one per run; NaN where a run lacks the metric
  std::vector<double> ratio_to_a;  // value / A's value; NaN for A itself and where undefined
  std::vector<double> noise;       // the relative change that counts (0.05 = 5%); NaN for A
  std::vector<std::string> mark;   // "", "slower", "faster", "more", "less"
};

// Reads and checks one result file; throws UserError naming the file if it cannot be read, is not
// JSON, or is not a moebench result of a schema this build reads.
CompareRun load_result(const std::string& path);
// The checks of load_result on an already parsed document.
void check_result(const nlohmann::json& j, const std::string& name);

// The keys (dotted paths) whose values change the work, where b differs from a, each as
// "mesh.ep: 2 (a.json) vs 4 (b.json)". Empty when the runs did the same work.
std::vector<std::string> work_differences(const CompareRun& a, const CompareRun& b);
// Throws UserError listing every difference of every run from runs[0].
void check_same_work(const std::vector<CompareRun>& runs);

// The rows for runs[0] (A) against every other run; threshold_pct < 0 means the noise rule.
std::vector<CompareRow> build_rows(const std::vector<CompareRun>& runs, double threshold_pct,
                                   const std::string& metrics);
// True when any run got slower than A beyond the noise in a step or phase time, a throughput or a
// bandwidth.
bool has_regression(const std::vector<CompareRow>& rows);
// One line about the result digests: "bitwise identical results" or which tensors differ.
std::string digest_summary(const std::vector<CompareRun>& runs);
// The whole report: '#' header lines, the aligned table, the digest line and the verdict.
std::string render_table(const std::vector<CompareRun>& runs, const std::vector<CompareRow>& rows,
                         double threshold_pct);

// Registers `compare` on app, filling opt when it is parsed.
CLI::App* add_compare_subcommand(CLI::App& app, CompareOptions& opt);
// Exit status: 0 compared (no regression, or not asked to fail on one); 1 a regression with
// --fail-on-regression; 2 refused input (unreadable or not a result, or different work).
int compare_command(const CompareOptions& opt);

}  // namespace moe
