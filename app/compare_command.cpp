#include "app/compare_command.h"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "app/cli.h"
#include "core/error.h"
#include "core/stats.h"
#include "core/workload.h"

namespace moe {
namespace {

using nlohmann::json;

constexpr int kSchemaMajor = 1;
// Below this a change is never counted, however tight the runs: timer resolution and clocks.
constexpr double kNoiseFloor = 0.01;
// With per-step samples in both runs, a change counts where the Mann-Whitney U test rejects "one
// distribution" at this level (and the medians differ by kNoiseFloor at least): a real 30%
// slowdown on noisy CPU runs (p10-p90 spread 35%) gives p far below it, two runs of the same
// work rarely come near it. Fewer samples than kMinSamples fall back to the spread rule.
constexpr double kSignificance = 0.001;
constexpr size_t kMinSamples = 8;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// `moebench gemm` keeps each GEMM's median alone, so its noise is taken, not measured: medians of
// 20 calls of the same GEMM on one GPU moved by up to 5% between rounds of one device call on the
// larger GEMMs (results/2026-11-28-session29; more on sub-millisecond ones).
constexpr double kGemmNoise = 0.05;

// The run report's phase order (result JSON objects are sorted by name, so the order is lost):
// the phases that partition the step, then their separately timed parts. Phases a later commit
// adds and this list lacks still appear, after the known ones.
const std::vector<std::string> kPhaseOrder = {
    "fsdp_gather",     "router_fwd",      "layout",          "shared_fwd",      "dispatch_fwd",
    "experts_fwd",     "combine_fwd",     "combine_bwd",     "experts_bwd",     "shared_bwd",
    "dispatch_bwd",    "router_bwd",      "grad_sync",       "counts_exchange", "a2a_dispatch_fwd",
    "a2a_combine_fwd", "a2a_combine_bwd", "a2a_dispatch_bwd"};

// Runs are A, B, C, ... in the table (R27, R28, ... past Z).
std::string label(size_t i) {
  return i < 26 ? std::string(1, char('A' + i)) : "R" + std::to_string(i + 1);
}

// The value at a JSON pointer, or nullptr where a file lacks it or has another shape there (a
// damaged or foreign file must give a message, never an exception from deep in the table).
const json* find(const json& j, const std::string& pointer) {
  try {
    const json::json_pointer p(pointer);
    return j.contains(p) ? &j.at(p) : nullptr;
  } catch (const json::exception&) {
    return nullptr;
  }
}

double number(const json& j, const std::string& pointer) {
  const json* v = find(j, pointer);
  return v && v->is_number() ? v->get<double>() : kNaN;
}

std::string text(const json& j, const std::string& pointer, const std::string& absent = "-") {
  const json* v = find(j, pointer);
  if (!v) return absent;
  return v->is_string() ? v->get<std::string>() : v->dump();
}

// A metric as read from one run: its value, the relative spread of the samples behind it, and
// the per-step samples themselves where the result keeps them (timing.samples_ms).
struct Sample {
  double value = kNaN;
  double spread = 0;
  std::vector<double> steps;
};

std::vector<double> step_samples(const json& run, const std::string& series) {
  std::vector<double> v;
  if (const json* s = find(run, "/timing/samples_ms/" + series); s && s->is_array())
    for (const json& x : *s)
      if (x.is_number()) v.push_back(x.get<double>());
  return v;
}

// (p90 - p10) / median of a {median, p10, p90} stats object; 0 where it cannot be formed.
double relative_spread(const json& run, const std::string& stats) {
  const double med = number(run, stats + "/median"), p10 = number(run, stats + "/p10"),
               p90 = number(run, stats + "/p90");
  if (!(med > 0) || std::isnan(p10) || std::isnan(p90)) return 0;
  return std::max(0.0, (p90 - p10) / med);
}

using Reader = std::function<Sample(const json&)>;

void add_row(std::vector<CompareRow>& rows, const std::vector<CompareRun>& runs,
             const std::string& metric, const std::string& unit, MetricKind kind,
             const Reader& read, double threshold_pct) {
  CompareRow row;
  row.metric = metric;
  row.unit = unit;
  row.kind = kind;
  std::vector<double> spread;
  std::vector<std::vector<double>> steps;
  for (const CompareRun& r : runs) {
    Sample s = read(r.result);
    row.values.push_back(s.value);
    spread.push_back(s.spread);
    steps.push_back(std::move(s.steps));
  }
  if (std::all_of(row.values.begin(), row.values.end(), [](double v) { return std::isnan(v); }))
    return;
  const double a = row.values[0];
  for (size_t i = 0; i < runs.size(); ++i) {
    const double v = row.values[i];
    const bool ratio_ok =
        i > 0 && kind != MetricKind::kStatus && std::isfinite(a) && a != 0 && std::isfinite(v);
    const double ratio = ratio_ok ? v / a : kNaN;
    double noise = kNaN;
    bool significant = true;
    const bool tested = i > 0 && threshold_pct < 0 && steps[0].size() >= kMinSamples &&
                        steps[i].size() >= kMinSamples;
    if (tested) {
      noise = kNoiseFloor;
      significant = mann_whitney_p(steps[0], steps[i]) < kSignificance;
    } else if (i > 0 && kind != MetricKind::kStatus) {
      noise =
          threshold_pct >= 0 ? threshold_pct / 100 : std::max({spread[0], spread[i], kNoiseFloor});
    }
    // Symmetric in ratio: X/A > 1 + noise or X/A < 1 / (1 + noise). A throughput is the
    // inverse of a time, so the two mark the same change alike, and a large noise (> 100%)
    // still lets a large speed-up count.
    std::string mark;
    if (ratio_ok && significant && (ratio > 1 + noise || ratio * (1 + noise) < 1)) {
      const bool up = ratio > 1;
      if (kind == MetricKind::kTime) mark = up ? "slower" : "faster";
      if (kind == MetricKind::kRate) mark = up ? "faster" : "slower";
      if (kind == MetricKind::kInfo) mark = up ? "more" : "less";
    }
    row.ratio_to_a.push_back(ratio);
    row.noise.push_back(noise);
    row.mark.push_back(mark);
  }
  rows.push_back(std::move(row));
}

// Every phase name in any run: known ones in the report's order, then the rest by name.
std::vector<std::string> phase_names(const std::vector<CompareRun>& runs) {
  std::set<std::string> all;
  for (const CompareRun& r : runs)
    if (const json* ph = find(r.result, "/timing/phases"); ph && ph->is_object())
      for (const auto& item : ph->items()) all.insert(item.key());
  std::vector<std::string> names;
  for (const std::string& n : kPhaseOrder)
    if (all.erase(n)) names.push_back(n);
  names.insert(names.end(), all.begin(), all.end());
  return names;
}

// A phase that is a part of another (in_step false) is indented, as in the run report.
std::string phase_label(const std::vector<CompareRun>& runs, const std::string& name) {
  for (const CompareRun& r : runs)
    if (const json* in = find(r.result, "/timing/phases/" + name + "/in_step");
        in && in->is_boolean())
      return *in ? name : " " + name;
  return name;
}

// A `moebench gemm --out` result (its "gemms" table) rather than a run's.
bool is_gemm_result(const json& j) { return j.is_object() && j.contains("gemms"); }

// A GEMM table's rows per expert: how many experts, their least and most rows, and the sum.
struct RowsSummary {
  size_t experts = 0;
  double least = kNaN, most = kNaN, sum = 0;
};
RowsSummary summarize_rows(const json* rows) {
  RowsSummary r;
  if (!rows || !rows->is_array()) return r;
  for (const json& v : *rows) {
    const double x = v.is_number() ? v.get<double>() : kNaN;
    r.least = r.experts == 0 ? x : std::min(r.least, x);
    r.most = r.experts == 0 ? x : std::max(r.most, x);
    r.sum += x;
    ++r.experts;
  }
  return r;
}

void flatten(const json& j, const std::string& path, std::map<std::string, json>& out) {
  if (j.is_object()) {
    for (const auto& item : j.items()) flatten(item.value(), path + "." + item.key(), out);
  } else {
    out[path] = j;
  }
}

// Config keys that do not change the work done per step (core/workload.h: the schedule and GEMM
// knobs, labels, step counts, checking). config.mesh is the requested mesh; the resolved one
// (mesh.*) is compared instead, so a difference is named once.
bool changes_work(const std::string& key) {
  const std::string prefix = "config.";
  if (key.rfind(prefix, 0) != 0) return true;
  return key.rfind("config.mesh.", 0) != 0 && workload_key_changes_work(key.substr(prefix.size()));
}

std::string trim_right(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Values span ms fractions to tokens/s: enough digits to see a change; exponents only for
// values below 1e-4 (sub-microsecond phases on the CPU backend).
std::string fmt_value(double v, MetricKind kind) {
  if (kind == MetricKind::kStatus) return std::isnan(v) ? "off" : (v != 0 ? "PASS" : "FAIL");
  if (std::isnan(v)) return "-";
  const double av = std::fabs(v);
  if (av == 0) return "0";
  if (av >= 1e4) return fmt("%.0f", v);
  if (av >= 1) return fmt("%.3f", v);
  return fmt("%.4g", v);
}

// The expert GEMMs' methods a run used: one name when all six share it, else each GEMM's.
std::string gemm_methods(const json& result) {
  const json* m = find(result, "/gemm/methods");
  if (!m || !m->is_object() || m->empty()) return "";
  std::set<std::string> names;
  std::string each;
  for (const auto& item : m->items()) {
    const std::string v = item.value().is_string() ? item.value().get<std::string>() : "?";
    names.insert(v);
    each += (each.empty() ? "" : ", ") + item.key() + " " + v;
  }
  return names.size() == 1 ? *names.begin() : each;
}

}  // namespace

// A `moebench gemm` result: a table of GEMMs, each with a positive, finite median.
void check_gemm_result(const json& j, const std::string& name) {
  const json* gemms = find(j, "/gemms");
  MOE_USER_CHECK(gemms && gemms->is_array() && !gemms->empty(),
                 name << ": gemms is not a non-empty array: not a complete moebench gemm result");
  for (const json& g : *gemms) {
    MOE_USER_CHECK(find(g, "/gemm") && find(g, "/gemm")->is_string() && find(g, "/method") &&
                       find(g, "/method")->is_string(),
                   name << ": a gemms entry without a gemm and method name: not a moebench "
                           "gemm result");
    const double ms = number(g, "/median_ms");
    MOE_USER_CHECK(std::isfinite(ms) && ms > 0,
                   name << ": " << g["gemm"].get<std::string>() << " "
                        << g["method"].get<std::string>() << " has median_ms " << ms
                        << ", not a positive finite time; compare only results of GEMMs that ran");
  }
}

void check_result(const json& j, const std::string& name) {
  MOE_USER_CHECK(j.is_object(), name << " is not a moebench result: not a JSON object");
  if (is_gemm_result(j)) return check_gemm_result(j, name);
  MOE_USER_CHECK(j.contains("schema_version"),
                 name << " is not a moebench result (no schema_version); give the JSON that "
                         "`moebench run --out FILE` (or `moebench gemm --out FILE`) writes");
  const json& v = j["schema_version"];
  int major = -1;
  if (v.is_number()) major = int(std::floor(v.get<double>()));
  if (v.is_string()) major = std::atoi(v.get<std::string>().c_str());
  MOE_USER_CHECK(major == kSchemaMajor,
                 name << " has schema_version " << v.dump() << " but this moebench reads "
                      << "schema_version " << kSchemaMajor << " results; compare it with a "
                      << "moebench of its own version");
  for (const std::string key : {"/config", "/mesh", "/timing/step/median"})
    MOE_USER_CHECK(find(j, key),
                   name << " lacks " << key.substr(1) << ": not a complete moebench result");
  MOE_USER_CHECK(find(j, "/timing/step/median")->is_number(),
                 name << ": timing.step.median is not a number: not a moebench result");
  // Times that cannot be a measurement make every ratio meaningless: refuse, do not compare.
  const double median = number(j, "/timing/step/median"), timed = number(j, "/timing/timed_steps");
  MOE_USER_CHECK(std::isfinite(median) && median > 0,
                 name << ": timing.step.median is " << median
                      << ", not a positive finite time; compare only results of runs that ran");
  MOE_USER_CHECK(!(timed < 1), name << ": no timed steps (timing.timed_steps " << timed
                                    << "); compare only results of runs that ran");
  for (const double v : step_samples(j, "step"))
    MOE_USER_CHECK(std::isfinite(v) && v > 0, name << ": a per-step time of " << v
                                                   << " ms in timing.samples_ms.step; "
                                                   << "not a measurement: compare refuses it");
}

CompareRun load_result(const std::string& path) {
  std::ifstream f(path);
  MOE_USER_CHECK(f.good(), "cannot read " << path << ": " << std::strerror(errno));
  CompareRun run;
  run.name = path;
  try {
    run.result = json::parse(f);
  } catch (const json::parse_error& e) {
    throw UserError(path + " is not JSON, so not a moebench result: " + e.what());
  }
  check_result(run.result, path);
  return run;
}

std::vector<std::string> work_differences(const CompareRun& a, const CompareRun& b) {
  const bool gemm_a = is_gemm_result(a.result), gemm_b = is_gemm_result(b.result);
  auto kind = [](bool gemm) { return gemm ? "a moebench gemm result" : "a run's result"; };
  if (gemm_a != gemm_b)
    return {std::string("kind: ") + kind(gemm_a) + " (" + a.name + ") vs " + kind(gemm_b) + " (" +
            b.name + ")"};
  std::map<std::string, json> fa, fb;
  // A run's work is its config and resolved mesh; a GEMM table's also its shapes' EP size and
  // rows per expert (results before config was recorded have only those).
  std::vector<const char*> tops = {"config", "mesh"};
  if (gemm_a) tops = {"config", "ep", "experts_local", "rows", "precision"};
  for (const char* top : tops) {
    if (a.result.contains(top)) flatten(a.result[top], top, fa);
    if (b.result.contains(top)) flatten(b.result[top], top, fb);
  }
  // Keys added to the config after schema_version 1 began: a result written before them did the
  // work of their default.
  static const std::map<std::string, json> kAddedLater = {{"config.expert_grad_dtype", "fp32"},
                                                          {"config.model.shared_experts", 0},
                                                          {"config.model.shared_ffn", 0},
                                                          {"config.precision", "bf16"}};
  for (auto* f : {&fa, &fb})
    for (const auto& [key, value] : kAddedLater)
      if (!f->count(key)) (*f)[key] = value;
  std::set<std::string> keys;
  for (const auto& kv : fa) keys.insert(kv.first);
  for (const auto& kv : fb) keys.insert(kv.first);
  std::vector<std::string> diffs;
  for (const std::string& k : keys) {
    if (!changes_work(k)) continue;
    const auto ia = fa.find(k), ib = fb.find(k);
    const bool in_a = ia != fa.end(), in_b = ib != fb.end();
    if (in_a && in_b && ia->second == ib->second) continue;
    // A GEMM table's rows per expert, by their count, range and sum (the lists run to hundreds).
    auto shown = [&k](const json& v) {
      if (k != "rows" || !v.is_array() || v.empty()) return v.dump();
      const RowsSummary r = summarize_rows(&v);
      return std::to_string(r.experts) + " experts of " + fmt("%.0f", r.least) + "-" +
             fmt("%.0f", r.most) + " rows, " + fmt("%.0f", r.sum) + " in all";
    };
    diffs.push_back(k + ": " + (in_a ? shown(ia->second) : "(absent)") + " (" + a.name + ") vs " +
                    (in_b ? shown(ib->second) : "(absent)") + " (" + b.name + ")");
  }
  return diffs;
}

void check_same_work(const std::vector<CompareRun>& runs) {
  std::string msg;
  for (size_t i = 1; i < runs.size(); ++i)
    for (const std::string& d : work_differences(runs[0], runs[i])) msg += "\n  " + d;
  MOE_USER_CHECK(msg.empty(),
                 "cannot compare: the runs did different work (they may differ only in the keys "
                 "of the report's knobs line and in "
                     << workload_run_keys() << "); the keys that differ:" << msg);
}

// Runs whose slowest ranks' median SM clocks differ by more than this get compare's note.
constexpr double kClockDifference = 0.03;

// The lowest of the ranks' median SM clocks (timing.clocks; a GEMM table's clocks), 0 where the
// result has none.
double slowest_sm_mhz(const json& j) {
  const json* ranks = find(j, is_gemm_result(j) ? "/clocks/ranks" : "/timing/clocks/ranks");
  double lowest = 0;
  if (!ranks || !ranks->is_array()) return 0;
  for (const json& r : *ranks) {
    const json* mhz = find(r, "/sm_mhz/median");
    const json* n = find(r, "/samples");
    if (!mhz || !mhz->is_number() || !n || !n->is_number() || n->get<double>() <= 0) continue;
    const double v = mhz->get<double>();
    if (lowest == 0 || v < lowest) lowest = v;
  }
  return lowest;
}

// The slowest rank's median SM clock (a run's timing.clocks, a GEMM table's clocks; results
// without it show "-"): marked beyond kClockDifference, as the table's note says.
void add_clock_row(std::vector<CompareRow>& rows, const std::vector<CompareRun>& runs,
                   double threshold_pct) {
  add_row(
      rows, runs, "sm_clock", "MHz", MetricKind::kInfo,
      [](const json& j) {
        const double mhz = slowest_sm_mhz(j);
        return Sample{mhz > 0 ? mhz : kNaN, kClockDifference, {}};
      },
      threshold_pct);
}

// The `# totals` lines' sums (results from before them have none): per arithmetic, each method's
// six expert GEMMs, then the fastest method of each. A sum of medians is given kGemmNoise too: its
// relative noise is at most its noisiest part's.
void add_gemm_total_rows(std::vector<CompareRow>& rows, const std::vector<CompareRun>& runs,
                         double threshold_pct) {
  std::vector<std::pair<std::string, std::string>> keys;  // (precision, method; "" = fastest)
  auto note = [&](const std::string& precision, const std::string& method) {
    const std::pair<std::string, std::string> k{precision, method};
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  };
  for (const CompareRun& r : runs)
    if (const json* totals = find(r.result, "/totals"); totals && totals->is_array())
      for (const json& t : *totals) {
        const std::string precision = text(t, "/precision");
        if (const json* m = find(t, "/methods"); m && m->is_object())
          for (const auto& item : m->items()) note(precision, item.key());
        note(precision, "");
      }
  for (const auto& [precision, method] : keys)
    add_row(
        rows, runs, "totals " + precision + " " + (method.empty() ? "fastest of each" : method),
        "ms", MetricKind::kTime,
        [precision = precision, method = method](const json& j) {
          if (const json* totals = find(j, "/totals"); totals && totals->is_array())
            for (const json& t : *totals)
              if (text(t, "/precision") == precision) {
                // json_pointer's `/` escapes the method's name ('~', '/') as a key.
                const double ms =
                    number(t, method.empty()
                                  ? "/fastest_each/ms"
                                  : (json::json_pointer("/methods") / method / "ms").to_string());
                return Sample{ms, kGemmNoise, {}};
              }
          return Sample{};
        },
        threshold_pct);
}

// A GEMM table's rows: each (gemm, method) any run timed, in A's order then the others', by its
// median; their totals; the clocks the calls ran at.
std::vector<CompareRow> build_gemm_rows(const std::vector<CompareRun>& runs, double threshold_pct,
                                        const std::string& metrics) {
  std::vector<CompareRow> rows;
  std::vector<std::pair<std::string, std::string>> keys;
  for (const CompareRun& r : runs)
    for (const json& g : r.result["gemms"]) {
      const std::pair<std::string, std::string> k{g["gemm"].get<std::string>(),
                                                  g["method"].get<std::string>()};
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  for (const auto& [gemm, method] : keys)
    add_row(
        rows, runs, gemm + " " + method, "ms", MetricKind::kTime,
        [gemm = gemm, method = method](const json& j) {
          for (const json& g : j["gemms"])
            if (g["gemm"] == gemm && g["method"] == method)
              return Sample{number(g, "/median_ms"), kGemmNoise, {}};
          return Sample{};
        },
        threshold_pct);
  add_gemm_total_rows(rows, runs, threshold_pct);
  if (metrics == "timing") return rows;
  add_clock_row(rows, runs, threshold_pct);
  return rows;
}

std::vector<CompareRow> build_rows(const std::vector<CompareRun>& runs, double threshold_pct,
                                   const std::string& metrics) {
  if (is_gemm_result(runs[0].result)) return build_gemm_rows(runs, threshold_pct, metrics);
  std::vector<CompareRow> rows;
  const std::vector<std::string> phases = phase_names(runs);
  auto stats = [](const std::string& ptr, const std::string& series) {
    return [ptr, series](const json& j) {
      return Sample{number(j, ptr + "/median"), relative_spread(j, ptr), step_samples(j, series)};
    };
  };
  for (const std::string& p : phases)
    add_row(rows, runs, phase_label(runs, p), "ms", MetricKind::kTime,
            stats("/timing/phases/" + p, p), threshold_pct);
  add_row(rows, runs, "step", "ms", MetricKind::kTime, stats("/timing/step", "step"),
          threshold_pct);
  if (metrics == "timing") return rows;

  // Throughput is the step median's inverse, so its noise is the step's spread.
  for (const auto& [key, unit] : {std::pair<std::string, std::string>{"tokens_per_s", "tokens/s"},
                                  {"tflops_per_rank", "TFLOP/s"}})
    add_row(
        rows, runs, key, unit, MetricKind::kRate,
        [key = key](const json& j) {
          return Sample{number(j, "/throughput/" + key), relative_spread(j, "/timing/step"),
                        step_samples(j, "step")};
        },
        threshold_pct);
  // Bandwidth is bytes over the phase median: the phase's spread.
  for (const std::string& p : phases)
    for (const char* bw : {"algbw", "busbw"})
      add_row(
          rows, runs, phase_label(runs, p) + " " + bw, "GB/s", MetricKind::kRate,
          [p, bw = std::string(bw)](const json& j) {
            const std::string ph = "/timing/phases/" + p;
            return Sample{number(j, ph + "/" + bw + "_gbps"), relative_spread(j, ph),
                          step_samples(j, p)};
          },
          threshold_pct);
  add_row(
      rows, runs, "high_water", "MiB", MetricKind::kInfo,
      [](const json& j) {
        return Sample{number(j, "/memory/high_water_bytes") / 1048576.0, 0, {}};
      },
      threshold_pct);
  add_clock_row(rows, runs, threshold_pct);
  add_row(
      rows, runs, "correctness", "", MetricKind::kStatus,
      [](const json& j) {
        const json* checked = find(j, "/correctness/checked");
        const json* pass = find(j, "/correctness/pass");
        if (!checked || !checked->is_boolean() || !*checked || !pass || !pass->is_boolean())
          return Sample{};
        return Sample{pass->get<bool>() ? 1.0 : 0.0, 0, {}};
      },
      threshold_pct);
  return rows;
}

bool has_regression(const std::vector<CompareRow>& rows) {
  for (const CompareRow& r : rows)
    if (r.kind == MetricKind::kTime || r.kind == MetricKind::kRate)
      for (const std::string& m : r.mark)
        if (m == "slower") return true;
  return false;
}

std::string digest_summary(const std::vector<CompareRun>& runs) {
  const json* da = find(runs[0].result, "/digests");
  if (!da || !da->is_object() || da->empty()) return "A has no digests; nothing to compare";
  // Results before digest_function was recorded used byte-wise FNV-1a.
  auto function = [](const json& j) {
    const json* f = find(j, "/digest_function");
    return f && f->is_string() ? f->get<std::string>() : std::string("fnv1a64");
  };
  std::vector<std::string> parts;
  bool all_same = true;
  for (size_t i = 1; i < runs.size(); ++i) {
    if (function(runs[i].result) != function(runs[0].result)) {
      all_same = false;
      parts.push_back(label(i) + " not comparable (digests by " + function(runs[i].result) +
                      ", A's by " + function(runs[0].result) + ")");
      continue;
    }
    const json* d = find(runs[i].result, "/digests");
    std::set<std::string> keys;
    for (const auto& item : da->items()) keys.insert(item.key());
    if (d && d->is_object())
      for (const auto& item : d->items()) keys.insert(item.key());
    std::string differ;
    for (const std::string& k : keys)
      if (!d || !d->is_object() || !d->contains(k) || !da->contains(k) || (*d)[k] != (*da)[k])
        differ += (differ.empty() ? "" : ", ") + k;
    all_same = all_same && differ.empty();
    parts.push_back(label(i) +
                    (differ.empty() ? " bitwise identical to A" : " differs from A in " + differ));
  }
  if (all_same) return "bitwise identical results";
  std::string line;
  for (const std::string& p : parts) line += (line.empty() ? "" : "; ") + p;
  line += " (expected when a commit changes the numerics; informational)";
  // The first run (after A) that `differs` from A, or 0 for none.
  auto first_differing = [&](auto differs) {
    for (size_t i = 1; i < runs.size(); ++i)
      if (differs(runs[0].result, runs[i].result)) return i;
    return size_t(0);
  };
  // Each step draws new tokens and the digests are of the last step, so runs of different
  // lengths differ without any change in the numerics.
  auto steps = [](const json& j) {
    return number(j, "/timing/warmup_steps") + number(j, "/timing/timed_steps");
  };
  if (first_differing([&](const json& a, const json& b) { return steps(a) != steps(b); }))
    line += "; note: the runs ran different numbers of steps and the digests are of the last step";
  // dw_in's and dw_out's digests are over each rank's experts as placed (docs/layer.md).
  auto placement = [](const json& j) {
    const json* p = find(j, "/config/expert_placement");
    return p && p->is_string() ? p->get<std::string>() : std::string("contiguous");
  };
  if (first_differing([&](const json& a, const json& b) { return placement(a) != placement(b); }))
    line +=
        "; note: the runs place the experts differently (expert_placement), and the dw_in and "
        "dw_out digests are over each rank's experts as placed";
  // GEMM methods may sum in other orders (on an H200, lt_multistream and grouped_sm90 gave equal
  // bits on Mixtral-8x7B's shapes, not on DeepSeek-V3's), and gemm.method auto chooses per run
  // (graph: true takes grouped_sm90), so equal workloads can differ in the last bits.
  if (const size_t i = first_differing([](const json& a, const json& b) {
        const std::string ma = gemm_methods(a), mb = gemm_methods(b);
        return !ma.empty() && !mb.empty() && ma != mb;
      }))
    line += "; note: the runs multiply with different GEMM methods (A: " +
            gemm_methods(runs[0].result) + "; " + label(i) + ": " + gemm_methods(runs[i].result) +
            "), which may sum in other orders: pin gemm.method to compare bits";
  return line;
}

// A run's header lines: each run's commit, backend, device and steps; A's workload and mesh.
void write_run_header(std::ostringstream& os, const std::vector<CompareRun>& runs) {
  char buf[512];
  for (size_t i = 0; i < runs.size(); ++i) {
    const json& j = runs[i].result;
    const json* dirty = find(j, "/provenance/git_dirty");
    // A profiler's cost is in a profiled run's times: a difference may be the profiler's.
    const json* profiled = find(j, "/provenance/profile");
    std::snprintf(buf, sizeof buf,
                  "# %-2s %s: commit %.12s%s, backend %s, device %s, %s timed "
                  "steps, %s%s\n",
                  label(i).c_str(), runs[i].name.c_str(), text(j, "/provenance/git_commit").c_str(),
                  dirty && dirty->is_boolean() && *dirty ? " (dirty)" : "",
                  text(j, "/provenance/backend").c_str(), text(j, "/provenance/device").c_str(),
                  text(j, "/timing/timed_steps").c_str(), text(j, "/provenance/time_utc").c_str(),
                  profiled && profiled->is_boolean() && *profiled ? ", profiled (--profile)" : "");
    os << buf;
  }
  const json& a = runs[0].result;
  os << "# workload " << text(a, "/config/name") << ": H=" << text(a, "/config/model/hidden")
     << " F=" << text(a, "/config/model/ffn") << " E=" << text(a, "/config/model/experts")
     << " K=" << text(a, "/config/model/topk")
     << ", tokens_per_rank=" << text(a, "/config/tokens_per_rank") << ", dtype "
     << text(a, "/config/dtype") << "; mesh " << text(a, "/mesh/world") << " ranks = ep "
     << text(a, "/mesh/ep") << " x fsdp " << text(a, "/mesh/fsdp") << "\n";
}

// A GEMM table's header lines: each table's commit, device and calls; A's shapes.
void write_gemm_header(std::ostringstream& os, const std::vector<CompareRun>& runs) {
  char buf[512];
  for (size_t i = 0; i < runs.size(); ++i) {
    const json& j = runs[i].result;
    const json* dirty = find(j, "/provenance/git_dirty");
    std::snprintf(buf, sizeof buf, "# %-2s %s: commit %.12s%s, device %s, median of %s calls, %s\n",
                  label(i).c_str(), runs[i].name.c_str(), text(j, "/provenance/git_commit").c_str(),
                  dirty && dirty->is_boolean() && *dirty ? " (dirty)" : "",
                  text(j, "/provenance/device").c_str(), text(j, "/iters").c_str(),
                  text(j, "/provenance/time_utc").c_str());
    os << buf;
  }
  const json& a = runs[0].result;
  const RowsSummary r = summarize_rows(find(a, "/rows"));
  os << "# workload " << text(a, "/workload") << " at ep " << text(a, "/ep") << ": "
     << text(a, "/experts_local") << " local experts x " << fmt("%.0f", r.least) << "-"
     << fmt("%.0f", r.most) << " rows (mean "
     << fmt("%.1f", r.experts ? r.sum / double(r.experts) : kNaN) << ", "
     << text(a, "/rows_from", "balanced") << "), H=" << text(a, "/config/model/hidden")
     << " F=" << text(a, "/config/model/ffn") << ", precision " << text(a, "/precision") << "\n";
}

std::string render_table(const std::vector<CompareRun>& runs, const std::vector<CompareRow>& rows,
                         double threshold_pct) {
  std::ostringstream os;
  char buf[512];
  const bool gemm = is_gemm_result(runs[0].result);
  os << "# moebench compare: " << runs.size() << (gemm ? " moebench gemm results" : " runs")
     << " of the same work, each against A\n";
  if (gemm)
    write_gemm_header(os, runs);
  else
    write_run_header(os, runs);
  if (threshold_pct >= 0) {
    os << "# noise: a change counts beyond " << fmt("%g", threshold_pct) << "% (--threshold)\n";
  } else if (gemm) {
    os << "# noise: moebench gemm keeps each GEMM's median alone: a change counts beyond "
       << fmt("%g", 100 * kGemmNoise) << "% (--threshold sets another)\n";
  } else {
    os << "# noise: with per-step samples in both runs, a change counts where a Mann-Whitney U "
          "test gives p < "
       << fmt("%g", kSignificance)
       << " and the medians differ by 1% at least (noise% shows 1.0); otherwise beyond the "
          "larger (p90-p10)/median of the two runs, at least 1%\n";
    for (size_t i = 0; i < runs.size(); ++i)
      if (step_samples(runs[i].result, "step").size() < kMinSamples)
        os << "# note: " << label(i) << " keeps fewer than " << kMinSamples
           << " per-step samples (an older result, or few steps): its rows use the spread rule\n";
  }
  // A run whose timed steps drift (the GPU's clocks still changing) is no steady state: a
  // difference from it may be the clocks'.
  for (size_t i = 0; i < runs.size(); ++i) {
    const double spread = number(runs[i].result, "/timing/step_drift/spread");
    if (spread > kDriftWarning)
      os << "# note: " << label(i) << "'s timed steps drift " << fmt("%.0f", 100 * spread)
         << "% (the medians of their thirds: timing.step_drift): its median is no steady "
            "state's; runs given warmup_s compare better\n";
  }
  // GPUs that ran at other clocks (a power cap, heat, another card) give other times for the
  // same code: a difference in time may then be the clocks'.
  const double a_mhz = slowest_sm_mhz(runs[0].result);
  for (size_t i = 1; i < runs.size(); ++i) {
    const double mhz = slowest_sm_mhz(runs[i].result);
    if (a_mhz > 0 && mhz > 0 && std::abs(mhz / a_mhz - 1) > kClockDifference)
      os << "# note: " << label(i) << "'s GPUs ran at " << fmt("%.0f", mhz) << " MHz against A's "
         << fmt("%.0f", a_mhz)
         << (gemm ? " (the calls' median SM clock, clocks)"
                  : " (the slowest rank's median SM clock, timing.clocks)")
         << ": a difference in time may be the clocks'\n";
  }
  os << "# X/A = X's value over A's; times: > 1 is slower; throughput, bandwidth: > 1 is "
        "faster\n#\n";

  size_t w = 12;
  for (const CompareRow& r : rows) w = std::max(w, r.metric.size());
  const int mw = int(w);
  std::snprintf(buf, sizeof buf, "# %-*s %-8s %12s", mw, "metric", "unit", "A");
  std::string header = buf;
  for (size_t i = 1; i < runs.size(); ++i) {
    std::snprintf(buf, sizeof buf, " %12s %7s %7s %-6s", label(i).c_str(),
                  (label(i) + "/A").c_str(), "noise%", "mark");
    header += buf;
  }
  os << trim_right(header) << "\n";
  for (const CompareRow& r : rows) {
    std::snprintf(buf, sizeof buf, "  %-*s %-8s %12s", mw, r.metric.c_str(), r.unit.c_str(),
                  fmt_value(r.values[0], r.kind).c_str());
    std::string line = buf;
    for (size_t i = 1; i < runs.size(); ++i) {
      const double ratio = r.ratio_to_a[i], noise = r.noise[i];
      std::snprintf(buf, sizeof buf, " %12s %7s %7s %-6s", fmt_value(r.values[i], r.kind).c_str(),
                    std::isnan(ratio) ? "-" : fmt("%.3f", ratio).c_str(),
                    std::isnan(noise) ? "-" : fmt("%.1f", 100 * noise).c_str(), r.mark[i].c_str());
      line += buf;
    }
    os << trim_right(line) << "\n";
  }

  if (!gemm) os << "#\n# digests: " << digest_summary(runs) << "\n";
  // The verdict names what --fail-on-regression acts on.
  std::string slower;
  for (size_t i = 1; i < runs.size(); ++i) {
    std::string names;
    for (const CompareRow& r : rows)
      if ((r.kind == MetricKind::kTime || r.kind == MetricKind::kRate) && r.mark[i] == "slower") {
        std::string m = r.metric;
        m.erase(0, m.find_first_not_of(' '));
        names += (names.empty() ? "" : ", ") + m + " x" + fmt("%.3f", r.ratio_to_a[i]);
      }
    if (!names.empty()) slower += (slower.empty() ? "" : "; ") + label(i) + ": " + names;
  }
  os << "# slower than A beyond the noise: " << (slower.empty() ? "none" : slower) << "\n";
  return os.str();
}

CLI::App* add_compare_subcommand(CLI::App& app, CompareOptions& opt) {
  CLI::App* c = app.add_subcommand(
      "compare",
      "compare result JSON files (run --out, or gemm --out) of the same work, each against the "
      "first");
  c->add_option("files", opt.files, "result files: A (the baseline), B, C, ...")
      ->required()
      ->expected(2, -1);
  c->add_option("--threshold", opt.threshold_pct,
                "a fixed change in percent that counts, instead of the runs' own noise")
      ->check(finite_range(0.0, 1000.0));
  c->add_flag("--fail-on-regression", opt.fail_on_regression,
              "exit 1 when a step or phase time, throughput or bandwidth of any run is slower "
              "than A's beyond the noise");
  c->add_option("--metrics", opt.metrics, "all | timing (step and phase times only)")
      ->check(CLI::IsMember({"all", "timing"}));
  c->add_flag("--allow-different-work", opt.allow_different_work,
              "compare runs whose work differs (the header names the keys) instead of refusing");
  c->footer(
      "Each value is shown with its ratio to A (X/A) and, where the change exceeds the noise, a\n"
      "mark: slower/faster for times (ms, lower is better), throughput and bandwidth (higher is\n"
      "better); more/less for memory. The noise of a metric is the larger of the two runs'\n"
      "relative spreads (p90 - p10) / median over their timed steps (a phase's own p10/p90, the\n"
      "step's for throughput), at least 1%; --threshold PCT replaces it with a fixed PCT%. A\n"
      "change counts when X/A > 1 + noise or X/A < 1 / (1 + noise). Where both runs keep\n"
      "per-step samples (timing.samples_ms), a change counts instead when a Mann-Whitney U test\n"
      "of the two runs' steps gives p < 0.001 and the medians differ by 1% at least.\n"
      "The runs must have done the same work: every config key except name, steps, warmup,\n"
      "check, reference and roofline, and mesh.*, must be equal, else compare refuses, naming\n"
      "the keys (--allow-different-work compares them anyway). Results with no timed steps or\n"
      "times that are not positive and finite are refused.\n"
      "moebench gemm tables (gemm --out) compare alike, one row per GEMM and method by its\n"
      "median; keeping no spread, a change counts beyond 5% unless --threshold is given.\n"
      "Exit status: 0 compared; 1 with --fail-on-regression, when any run is slower than A\n"
      "beyond the noise in the step, a phase, throughput or bandwidth; 2 bad input (unreadable,\n"
      "not a moebench result, or different work).");
  return c;
}

int compare_command(const CompareOptions& opt) {
  // Under mpirun every rank reads the same files and reaches the same verdict; one prints.
  const bool print = world_rank_or_minus_one() <= 0;
  try {
    MOE_USER_CHECK(opt.files.size() >= 2, "compare needs at least two result files");
    std::vector<CompareRun> runs;
    for (const std::string& f : opt.files) runs.push_back(load_result(f));
    // A GEMM table and a run's result share no metric: never compared, whatever is allowed.
    for (const CompareRun& r : runs)
      MOE_USER_CHECK(is_gemm_result(r.result) == is_gemm_result(runs[0].result),
                     "cannot compare " << r.name << " with " << runs[0].name
                                       << ": one is a moebench gemm result, the other a run's");
    if (!opt.allow_different_work) check_same_work(runs);
    const std::vector<CompareRow> rows = build_rows(runs, opt.threshold_pct, opt.metrics);
    if (print) {
      if (opt.allow_different_work)
        for (size_t i = 1; i < runs.size(); ++i)
          for (const std::string& d : work_differences(runs[0], runs[i]))
            std::printf("# note: different work (--allow-different-work): %s\n", d.c_str());
      std::fputs(render_table(runs, rows, opt.threshold_pct).c_str(), stdout);
      std::fflush(stdout);
    }
    return opt.fail_on_regression && has_regression(rows) ? 1 : 0;
  } catch (const UserError& e) {
    if (print) spdlog::error("{}", e.what());
    return 2;
  }
}

}  // namespace moe
