#include "app/report.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/cost_model.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/grouped_gemm.h"

namespace moe {
namespace {

using nlohmann::json;

json summary_json(const Summary& s) {
  return {{"median", s.median}, {"p10", s.p10},   {"p90", s.p90},    {"min", s.min},
          {"max", s.max},       {"mean", s.mean}, {"count", s.count}};
}

std::string shell_output(const std::string& cmd) {
  std::string out;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof(buf), f)) out += buf;
    pclose(f);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

json provenance(const RunResult& r) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  char when[64];
  std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(mpi, &len);
  std::string mpi_version(mpi, strnlen(mpi, size_t(len)));
  if (auto nl = mpi_version.find('\n'); nl != std::string::npos) mpi_version.resize(nl);
  // Asked of git at run time: a build configured at one commit may run after later edits.
  const std::string src = MOE_SOURCE_DIR;
  // A copy of the tree sent to a lent GPU machine gets both from the environment, set by
  // scripts/gpu_check.sh and sweep.sh from the commit it was sent at (BUILD_COMMIT): the copy's
  // own git metadata, where it has any, can name an older commit.
  const char* env_commit = std::getenv("MOE_GIT_COMMIT");  // checked by check_git_commit_env
  const char* env_dirty = std::getenv("MOE_GIT_DIRTY");
  std::string commit, dirty;
  if (env_commit && std::strlen(env_commit) == 40) {
    commit = env_commit;
    dirty = env_dirty && std::string(env_dirty) != "0" ? "dirty" : "";
  } else {
    commit = shell_output("git -C '" + src + "' rev-parse HEAD 2>/dev/null");
    dirty =
        shell_output("git -C '" + src + "' status --porcelain --untracked-files=no 2>/dev/null");
    if (commit.size() != 40) commit = MOE_GIT_COMMIT;
  }
  nlohmann::json j = {{"time_utc", when},
                      {"moebench_version", MOE_VERSION},
                      {"git_commit", commit},
                      {"git_dirty", !dirty.empty()},
                      {"host", host},
                      {"command_line", r.command_line},
                      {"compiler", std::string("g++ ") + __VERSION__},
                      {"mpi", mpi_version},
                      {"backend", r.backend}};
  for (const auto& [k, v] : r.backend_info) j[k] = v;
  // Per rank: on several hosts, or with a launcher that renumbers GPUs per rank, `host` and
  // `device` above are rank 0's only.
  json ranks = json::array();
  for (const RankPlace& p : r.places) {
    json e = {{"rank", p.rank}, {"host", p.host}};
    if (p.gpu >= 0)
      e["gpu"] = {
          {"index", p.gpu}, {"pci_bus_id", p.pci_bus_id}, {"uuid", p.uuid}, {"name", p.gpu_name}};
    ranks.push_back(e);
  }
  j["ranks"] = ranks;
  j["profile"] = r.profile;
  return j;
}

namespace {

double rate(double amount, double ms) { return ms > 0 ? amount / (ms * 1e-3) : 0.0; }

// floor / measured: 1 is the machine's limit; 0 where there is no floor or no time.
double efficiency(double floor_ms, double ms) { return floor_ms > 0 && ms > 0 ? floor_ms / ms : 0; }

// {GEMM name: method}.
json per_gemm_json(const ExpertGemmMethods& methods) {
  json j = json::object();
  for (int i = 0; i < kNumExpertGemms; ++i) j[kExpertGemmNames[size_t(i)]] = methods[size_t(i)];
  return j;
}

json gemm_json(const GemmReport& g) {
  const bool chosen = !g.warmup_experts_ms.empty();
  const PerGemmTry& t = g.warmup_per_gemm;
  json per_gemm = json::object();
  if (chosen)
    per_gemm = {{"tried", t.tried},
                {"methods", per_gemm_json(t.methods)},
                {"against", t.against},
                {"ms", t.tried ? json(t.ms) : json(nullptr)},
                {"against_ms", t.tried ? json(t.against_ms) : json(nullptr)}};
  return {{"method", g.method.empty() ? json(nullptr) : json(g.method)},
          {"methods", g.method.empty() ? json::object() : per_gemm_json(g.methods)},
          {"chosen_in_warmup", chosen},
          {"warmup_experts_ms", g.warmup_experts_ms},
          {"warmup_gemm_ms", g.warmup_gemm_ms},
          {"warmup_per_gemm", per_gemm},
          {"added_warmup_steps", g.added_warmup_steps},
          {"plans_before_timed", g.before_timed.plans},
          {"heuristic_queries_before_timed", g.before_timed.heuristic_queries},
          {"tunings_before_timed", g.before_timed.tunings},
          {"tunings_timed", g.timed.tunings},
          {"plans_timed", g.timed.plans},
          {"heuristic_queries_timed", g.timed.heuristic_queries}};
}

json roofline_json(const RunResult& r) {
  const Calibration& c = r.calibration;
  if (!c.done) return {{"done", false}};
  return {{"done", true},
          {"gemm_tflops", c.gemm_tflops},
          {"gemm_m", c.gemm_m},
          {"gemm_n", c.gemm_n},
          {"gemm_k", c.gemm_k},
          {"gemm_dtype", c.dtype},
          {"fp8_gemm_tflops", c.fp8_gemm_tflops},
          {"fp8_precision", c.fp8_precision},
          {"a2a_applicable", c.has_a2a()},
          {"a2a_algbw_gbps", c.a2a_algbw_gbps},
          {"a2a_busbw_gbps", c.a2a_busbw_gbps},
          {"a2a_bytes_per_rank", c.a2a_bytes_per_rank},
          {"mem_gbps", c.mem_gbps},
          {"mem_copy_bytes", c.mem_copy_bytes},
          {"ep", c.ep},
          {"seconds", c.seconds},
          {"step_floor_ms", r.step_floor_ms},
          {"step_efficiency", efficiency(r.step_floor_ms, r.step_ms.median)}};
}

const char* const kLaneFigureNames[kNumLaneFigures] = {"main_busy", "side_busy", "a2a",
                                                       "a2a_exposed", "a2a_least_rank"};

json lanes_json(const LaneReport& l) {
  json j = json::object();
  for (int i = 0; i < kNumLaneFigures; ++i) j[kLaneFigureNames[i]] = summary_json(l.figures[i]);
  const double a2a = l.figures[kA2a].median;
  j["a2a_exposed_share"] = a2a > 0 ? l.figures[kA2aExposed].median / a2a : 0.0;
  j["a2a_wait_share"] = a2a > 0 ? 1.0 - l.figures[kA2aLeastRank].median / a2a : 0.0;
  return j;
}

// "# lanes:" the medians of each lane's busy time, and of the all-to-alls, their exposed part and
// the least rank's all-to-all time (the rest of the slowest's waits for the others).
void print_lanes(const LaneReport& l, std::FILE* out) {
  const Summary* f = l.figures;
  std::fprintf(out, "# lanes: main busy %.3f ms, side busy %.3f ms; ", f[kMainBusy].median,
               f[kSideBusy].median);
  if (f[kA2a].median > 0)
    std::fprintf(out,
                 "all-to-all %.3f ms, %.3f ms of it exposed (%.1f%%, the rest beside work "
                 "on the other lane); %.3f ms on the rank with the least (%.1f%% of it waits for "
                 "slower ranks)\n",
                 f[kA2a].median, f[kA2aExposed].median,
                 100 * f[kA2aExposed].median / f[kA2a].median, f[kA2aLeastRank].median,
                 100 * (1 - f[kA2aLeastRank].median / f[kA2a].median));
  else
    std::fprintf(out, "no all-to-all\n");
}

// "# ranks:" the in-step phases whose time differs most between ranks (medians of the slowest
// rank's ms less the fastest's), the largest first: where one rank's work, or its wait for
// another's, sets the pace. Only with several ranks, and only phases that differ at all.
void print_rank_spread(const RunResult& r, std::FILE* out) {
  if (r.mesh.world < 2) return;
  std::vector<const PhaseResult*> by;
  for (const PhaseResult& p : r.phases)
    if (p.in_step && p.rank_spread.median > 0) by.push_back(&p);
  if (by.empty()) return;
  std::sort(by.begin(), by.end(), [](const PhaseResult* a, const PhaseResult* b) {
    return a->rank_spread.median > b->rank_spread.median;
  });
  constexpr size_t kShown = 3;
  std::string top;
  for (size_t i = 0; i < by.size() && i < kShown; ++i) {
    char ms[32];
    std::snprintf(ms, sizeof ms, " %.3f", by[i]->rank_spread.median);
    top += (i ? ", " : "") + by[i]->name + ms;
  }
  std::fprintf(out,
               "# ranks: the slowest rank's ms less the fastest's, median over steps: %s (a "
               "compute phase's is one rank's extra work, which the others then wait for in a "
               "collective)\n",
               top.c_str());
}

json host_json(const HostReport& h) {
  return {{"step", h.step},
          {"issue_ms", summary_json(h.issue_ms)},
          {"waits_per_step", h.waits_per_step}};
}

// "# host:" what issuing a step cost the host, and whether it waited for the device.
void print_host(const HostReport& h, std::FILE* out) {
  const char* how = h.step == "graph"       ? "replayed from one CUDA graph"
                    : h.step == "sync-free" ? "sync-free, issued call by call (no graphs here)"
                                            : "issued call by call";
  std::fprintf(out,
               "# host: %.3f ms to issue a step (median), %.1f waits for the device per step; "
               "steps %s\n",
               h.issue_ms.median, h.waits_per_step, how);
}

// "# warning:" where the timed steps' thirds differ by more than kDriftWarning: their median is
// then no steady state's. An H100 at its 700 W cap lowers its SM clocks from 1980 MHz to
// 1065-1500 a second or so into a load (Mixtral-8x7B at EP 2, results/2026-11-27-session26).
void print_drift(const Drift& d, std::FILE* out) {
  if (d.spread <= kDriftWarning) return;
  std::fprintf(out,
               "# warning: the timed steps drift: the medians of their first, middle and last "
               "thirds are %.3f, %.3f and %.3f ms (%.0f%% apart); a GPU at its power or thermal "
               "limit lowers its clocks a second or more into a load: for steady-state figures "
               "give the run warmup_s (seconds of untimed steps), and compare runs of equal "
               "length\n",
               d.thirds[0], d.thirds[1], d.thirds[2], 100 * d.spread);
}

// The table's floor and eff% cells (16 chars each), blank where there is no floor.
void floor_cells(double floor_ms, double ms, char* floor_cell, char* eff_cell) {
  if (floor_ms <= 0) return;
  std::snprintf(floor_cell, 16, "%.4f", floor_ms);
  std::snprintf(eff_cell, 16, "%.1f", 100 * efficiency(floor_ms, ms));
}

const PhaseResult* find_phase(const RunResult& r, const std::string& name) {
  for (const PhaseResult& p : r.phases)
    if (p.name == name) return &p;
  return nullptr;
}

std::string human_bytes(double b) {
  char buf[32];
  if (b >= 1 << 30)
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1 << 30));
  else if (b >= 1 << 20)
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  return buf;
}

// The efficiency footer and what the dispatcher's collectives moved: the nominal bytes and those
// that actually left the rank.
void print_roofline_footer(const RunResult& r, std::FILE* out) {
  if (r.calibration.done)
    std::fprintf(
        out,
        "# efficiency: step floor %.3f ms / step median %.3f ms = %.1f%% (floors: FLOPs at the "
        "calibrated GEMM rate%s or the experts' weight, gradient and row bytes at the calibrated "
        "memory bandwidth, whichever is longer (bound: compute or memory), all-to-all bytes at "
        "the calibrated algbw%s; fsdp_gather, layout and grad_sync have none)\n",
        r.step_floor_ms, r.step_ms.median, 100 * efficiency(r.step_floor_ms, r.step_ms.median),
        r.calibration.fp8_gemm_tflops > 0 ? " (the expert GEMMs' in FP8)" : "",
        r.calibration.has_a2a() ? "" : ", none at ep 1");
  std::string sent;
  for (const char* name :
       {"a2a_dispatch_fwd", "a2a_combine_fwd", "a2a_combine_bwd", "a2a_dispatch_bwd"}) {
    const PhaseResult* p = find_phase(r, name);
    if (!p || !p->bytes_sent) return;
    sent += std::string(sent.empty() ? "" : ", ") + (name + 4) + " " + human_bytes(*p->bytes_sent);
  }
  std::fprintf(out,
               "# dispatch %s bytes per rank: %s through a2a_dispatch_fwd (own rows included); "
               "sent to other ranks (mean over steps, max over ranks): %s; %.2f rows per token to "
               "other ranks\n",
               name_of(r.workload.dispatch),
               human_bytes(find_phase(r, "a2a_dispatch_fwd")->bytes).c_str(), sent.c_str(),
               r.routing.rows_per_token_to_others);
  if (r.workload.dispatch_dtype == DispatchDtype::kFp8) {
    const int64_t H = r.workload.model.hidden, row = fp8_row_bytes(H);
    std::fprintf(out,
                 "# dispatch_dtype fp8: a dispatched row is %ld bytes (e4m3 codes and 1 x 128 "
                 "scales) against %ld in bf16, %.1f%% fewer; the other three directions bf16\n",
                 long(row), long(2 * H), 100.0 * (1.0 - double(row) / double(2 * H)));
  }
}

}  // namespace

json tile_rows_json(double over_rows) {
  return over_rows > 0 ? json{{"tile", kGroupedTileRows}, {"over_rows", over_rows}} : json(nullptr);
}

json clocks_json(const ClocksReport& c) {
  json ranks = json::array();
  for (size_t i = 0; i < c.ranks.size(); ++i) {
    const ClockSummary& k = c.ranks[i];
    ranks.push_back({{"rank", int(i)},
                     {"samples", k.samples},
                     {"sm_mhz",
                      {{"median", k.sm_mhz.median},
                       {"p10", k.sm_mhz.p10},
                       {"p90", k.sm_mhz.p90},
                       {"min", k.sm_mhz.min},
                       {"max", k.sm_mhz.max}}},
                     {"power_w", {{"median", k.power_w.median}, {"max", k.power_w.max}}},
                     {"power_limit_w", k.power_limit_w},
                     {"power_limited_share", k.power_limited_share},
                     {"thermal_limited_share", k.thermal_limited_share}});
  }
  return {{"source", c.source.empty() ? json(nullptr) : json(c.source)},
          {"interval_ms", kClockSampleIntervalMs},
          {"why_none", c.why_none.empty() ? json(nullptr) : json(c.why_none)},
          {"ranks", ranks}};
}

// "# clocks:" the SM clock the samples saw (the ranks' medians, and the spread of all samples),
// the power drawn against the limit, and how often the driver held the clocks down for power or
// heat: a slower step, or a rank waiting in a collective, may be the clocks'.
void print_clocks(const ClocksReport& c, std::FILE* out, const char* over) {
  if (c.ranks.empty()) {
    std::fprintf(out, "# clocks: none (%s)\n", c.why_none.c_str());
    return;
  }
  double lo = 0, hi = 0, p10 = 0, p90 = 0, watts = 0, limit = 0, capped = 0, hot = 0;
  int lo_rank = 0, hi_rank = 0, n = 0;
  int64_t samples = 0;
  for (size_t i = 0; i < c.ranks.size(); ++i) {
    const ClockSummary& k = c.ranks[i];
    if (k.samples == 0) continue;
    if (n == 0 || k.sm_mhz.median < lo) lo = k.sm_mhz.median, lo_rank = int(i);
    if (n == 0 || k.sm_mhz.median > hi) hi = k.sm_mhz.median, hi_rank = int(i);
    p10 = n == 0 ? k.sm_mhz.p10 : std::min(p10, k.sm_mhz.p10);
    p90 = std::max(p90, k.sm_mhz.p90);
    watts = std::max(watts, k.power_w.median);
    limit = std::max(limit, k.power_limit_w);
    capped += k.power_limited_share * double(k.samples);
    hot += k.thermal_limited_share * double(k.samples);
    samples += k.samples;
    ++n;
  }
  if (n == 1)
    std::fprintf(out, "# clocks: SM %.0f MHz (median; p10 %.0f, p90 %.0f)", lo, p10, p90);
  else
    std::fprintf(out,
                 "# clocks: SM %.0f MHz (rank %d) to %.0f MHz (rank %d), the ranks' medians; "
                 "p10 %.0f, p90 %.0f",
                 lo, lo_rank, hi, hi_rank, p10, p90);
  std::fprintf(out, "; power %.0f W (median%s)", watts, n > 1 ? ", the highest rank's" : "");
  if (limit > 0) std::fprintf(out, " of a %.0f W limit", limit);
  std::fprintf(out,
               "; held down for power in %.0f%%, for heat in %.0f%% of %lld samples (%s, every "
               "%d ms of %s)\n",
               100 * capped / double(samples), 100 * hot / double(samples), (long long)samples,
               c.source.c_str(), kClockSampleIntervalMs, over);
  // Steps too short for a sample every rank (a check's two steps): say whose clocks these are.
  if (n < int(c.ranks.size()))
    std::fprintf(out,
                 "# clocks: %d of %d ranks took a sample (timed steps of a few ms: run more steps "
                 "for every rank's clocks)\n",
                 n, int(c.ranks.size()));
}

void check_git_commit_env() {
  if (const char* d = std::getenv("MOE_GIT_DIRTY"))
    MOE_USER_CHECK(std::string(d) == "0" || std::string(d) == "1",
                   "MOE_GIT_DIRTY=" << d << ": use 0 (clean) or 1 (dirty), or unset it");
  const char* v = std::getenv("MOE_GIT_COMMIT");
  if (!v) return;
  const std::string s(v);
  const bool full = s.size() == 40 && s.find_first_not_of("0123456789abcdefABCDEF") == s.npos;
  MOE_USER_CHECK(full,
                 "MOE_GIT_COMMIT=" << s << ": not a full 40-digit commit sha; set it to "
                                   << "`git rev-parse <commit>` or unset it (then git is asked)");
}

json result_to_json(const RunResult& r) {
  json j;
  j["schema_version"] = 1;
  j["provenance"] = provenance(r);
  j["config"] = workload_to_json(r.workload);
  j["mesh"] = {{"world", r.mesh.world}, {"ep", r.mesh.ep}, {"fsdp", r.mesh.fsdp}};
  json phases = json::object();
  for (const PhaseResult& p : r.phases) {
    json ph = summary_json(p.ms);
    ph["rank_spread"] = summary_json(p.rank_spread);
    ph["in_step"] = p.in_step;
    if (!p.beside.empty()) ph["beside"] = p.beside;
    ph["share"] = r.step_ms.median > 0 && p.in_step ? p.ms.median / r.step_ms.median : 0.0;
    if (p.flops > 0) {
      ph["flops"] = p.flops;
      ph["tflops_per_rank"] = rate(p.flops / r.mesh.world, p.ms.median) * 1e-12;
    }
    if (p.bytes > 0) {
      ph["bytes_per_rank"] = p.bytes;
      ph["algbw_gbps"] = rate(p.bytes, p.ms.median) * 1e-9;
      ph["busbw_gbps"] = rate(p.bytes, p.ms.median) * 1e-9 * p.bus_factor;
    }
    if (p.bytes_sent) ph["bytes_sent_per_rank"] = *p.bytes_sent;
    if (p.mem_bytes > 0) ph["mem_bytes_per_rank"] = p.mem_bytes;
    if (p.floor_ms > 0) {
      ph["floor_ms"] = p.floor_ms;
      ph["floor_bound"] = p.floor_bound;
      ph["efficiency"] = efficiency(p.floor_ms, p.ms.median);
    }
    phases[p.name] = ph;
  }
  j["timing"] = {{"unit", "ms"},
                 {"warmup_steps", r.warmup_steps},
                 {"settle_steps", r.settle_steps},
                 {"timed_steps", r.timed_steps},
                 {"step", summary_json(r.step_ms)},
                 {"step_drift",
                  r.step_drift.thirds.empty()
                      ? json(nullptr)
                      : json{{"thirds_ms", r.step_drift.thirds}, {"spread", r.step_drift.spread}}},
                 {"phases", phases},
                 {"lanes", lanes_json(r.lanes)},
                 {"host", host_json(r.host)},
                 {"clocks", clocks_json(r.clocks)},
                 {"samples_ms", r.samples_ms}};
  // Outside the steps (fp8_weights cached): what one quantization of the weights costs.
  j["timing"]["fp8_weight_quantize_ms"] =
      r.fp8_weight_quantize_ms >= 0 ? json(r.fp8_weight_quantize_ms) : json(nullptr);
  j["throughput"] = {
      {"tokens_per_step", r.tokens_per_step},
      {"tokens_per_s", rate(r.tokens_per_step, r.step_ms.median)},
      {"model_flops_per_step", r.model_flops_per_step},
      {"tflops_per_rank", rate(r.model_flops_per_step / r.mesh.world, r.step_ms.median) * 1e-12},
      {"flops_formula", kModelFlopsFormula}};
  const RoutingStats& rs = r.routing;
  const double kept = rs.rows_routed_per_step - rs.rows_dropped_per_step;
  j["routing"] = {
      {"mode", name_of(r.workload.routing.mode)},
      {"rows_per_expert", summary_json(rs.rows_per_expert)},
      {"rows_received_per_rank", summary_json(rs.rows_received_per_rank)},
      {"expert_load_max_over_mean", rs.load_max_over_mean},
      {"rank_load_max_over_mean", rs.rank_load_max_over_mean},
      {"experts_without_tokens", rs.experts_without_tokens},
      {"rows_routed_per_step", rs.rows_routed_per_step},
      {"capacity_rows_per_expert_per_rank", rs.capacity_rows},
      {"rows_dropped_per_step", rs.rows_dropped_per_step},
      {"dropped_fraction",
       rs.rows_routed_per_step > 0 ? rs.rows_dropped_per_step / rs.rows_routed_per_step : 0.0},
      {"align", r.workload.align},
      {"rows_padded_per_step", rs.rows_padded_per_step},
      {"padding_fraction", kept > 0 ? rs.rows_padded_per_step / kept : 0.0},
      {"tile_rows", tile_rows_json(rs.tile_rows_over_rows)},
      {"rows_per_token_to_other_ranks", rs.rows_per_token_to_others},
      {"first_step_rank_load",
       rs.first_step_rank_load_placed > 0
           ? nlohmann::json{{"contiguous_max_over_mean", rs.first_step_rank_load_contiguous},
                            {"placed_max_over_mean", rs.first_step_rank_load_placed}}
           : nlohmann::json(nullptr)}};
  j["gemm"] = gemm_json(r.gemm);
  j["roofline"] = roofline_json(r);
  j["memory"] = {{"high_water_bytes", r.memory_high_water_bytes},
                 {"host_peak_rss_bytes", r.host_peak_rss_bytes}};
  json checks = json::array();
  for (const CheckResult& c : r.checks) {
    json tensors = json::object();
    for (const TensorCheck& t : c.tensors) {
      tensors[t.name] = {{"rel_l2", t.rel_l2}, {"max_abs", t.max_abs},     {"tol", t.tol},
                         {"count", t.count},   {"nonfinite", t.nonfinite}, {"pass", t.pass}};
      if (t.rel_l2_unquantized >= 0) tensors[t.name]["rel_l2_unquantized"] = t.rel_l2_unquantized;
    }
    checks.push_back({{"step", c.step},
                      {"reference", c.reference},
                      {"reference_seconds", c.reference_seconds},
                      {"tensors", tensors},
                      {"routing",
                       {{"tokens", c.routing.tokens},
                        {"mismatches", c.routing.mismatches},
                        {"near_ties", c.routing.near_ties},
                        {"drop_mismatches", c.routing.drop_mismatches},
                        {"drop_near_ties", c.routing.drop_near_ties},
                        {"pass", c.routing.pass}}},
                      {"fp8_scales", c.fp8_scales.reported < 0
                                         ? json(nullptr)
                                         : json{{"reported", c.fp8_scales.reported},
                                                {"adopted", c.fp8_scales.adopted},
                                                {"adopted_max_rel", c.fp8_scales.adopted_max_rel}}},
                      {"pass", c.pass}});
  }
  // An unchecked run says so: status "unchecked" and pass null, never a pass it did not earn.
  const bool checked = !r.checks.empty();
  j["correctness"] = {{"checked", checked},
                      {"status", !checked   ? "unchecked"
                                 : r.pass() ? "pass"
                                            : "fail"},
                      {"checks", checks},
                      {"pass", checked ? json(r.pass()) : json(nullptr)}};
  j["digests"] = r.digests;
  j["digest_function"] = r.digest_function;
  return j;
}

// Fewer tokens than this in the world, and a failed check gets the note on cancellation.
constexpr int64_t kFewCheckedTokens = 16;

// One expert a token with a constant weight (normalized, or the top-k softmax of one logit)
// gives the gate no gradient through the combine; no z loss, and an aux loss only over balanced
// routing (each expert's fraction the same, against scores that sum to one a token), give it
// none either. dw_gate is then zero in exact arithmetic, each side's value rounding noise.
static bool gate_gradient_is_zero(const Workload& w) {
  const RouterConfig& r = w.router;
  return w.model.topk == 1 && (r.normalize_topk || r.softmax_after_topk) && r.z_coeff == 0 &&
         (r.aux_coeff == 0 || w.routing.mode == RoutingMode::kBalanced);
}

static bool tensor_failed(const std::vector<CheckResult>& checks, const std::string& name) {
  for (const CheckResult& c : checks)
    for (const TensorCheck& t : c.tensors)
      if (t.name == name && !t.pass) return true;
  return false;
}

// With several checked steps the table above is the first one's: each tensor's largest rel_l2
// over them, and where, so that a step near its tolerance shows without reading the JSON.
static void print_worst_steps(const std::vector<CheckResult>& checks, std::FILE* out) {
  std::fprintf(out, "# worst rel_l2 of the %zu checked steps:", checks.size());
  const CheckResult& first = checks.front();
  for (size_t i = 0; i < first.tensors.size(); ++i) {
    const CheckResult* worst = &first;
    for (const CheckResult& k : checks)
      if (i < k.tensors.size() && k.tensors[i].rel_l2 > worst->tensors[i].rel_l2) worst = &k;
    std::fprintf(out, "%s %s %.3e (step %ld)", i ? "," : "", first.tensors[i].name.c_str(),
                 worst->tensors[i].rel_l2, long(worst->step));
  }
  std::fprintf(out, "\n");
}

void print_summary(const RunResult& r, std::FILE* out) {
  const Workload& w = r.workload;
  const nlohmann::json prov = provenance(r);
  std::fprintf(out, "# moebench %s, backend %s, commit %.12s%s, %s\n", MOE_VERSION,
               r.backend.c_str(), prov["git_commit"].get<std::string>().c_str(),
               prov["git_dirty"].get<bool>() ? " (dirty)" : "",
               prov["time_utc"].get<std::string>().c_str());
  if (r.profile)
    std::fprintf(out,
                 "# profiled (--profile): the times include what an attached profiler costs\n");
  if (!r.backend_info.empty()) {
    std::fprintf(out, "#");
    for (const auto& [k, v] : r.backend_info) std::fprintf(out, " %s %s;", k.c_str(), v.c_str());
    std::fprintf(out, "\n");
  }
  const GemmReport& g = r.gemm;
  if (!g.method.empty()) {
    std::fprintf(out, "# expert GEMMs: %s", g.method.c_str());
    if (std::any_of(g.methods.begin(), g.methods.end(),
                    [&](const std::string& m) { return m != g.method; })) {
      const char* sep = " (";
      for (int i = 0; i < kNumExpertGemms; ++i) {
        std::fprintf(out, "%s%s %s", sep, kExpertGemmNames[size_t(i)],
                     g.methods[size_t(i)].c_str());
        sep = ", ";
      }
      std::fprintf(out, ")");
    }
    if (!g.warmup_experts_ms.empty()) {
      std::fprintf(out, " (chosen in warm-up");
      if (g.added_warmup_steps > 0)
        std::fprintf(out, " with %ld step%s added for the tries and its own warm-up",
                     long(g.added_warmup_steps), g.added_warmup_steps == 1 ? "" : "s");
      std::fprintf(out, ", experts fwd+bwd:");
      const char* sep = " ";
      for (const auto& [m, ms] : g.warmup_experts_ms) {
        std::fprintf(out, "%s%s %.2f ms", sep, m.c_str(), ms);
        sep = ", ";
      }
      const PerGemmTry& t = g.warmup_per_gemm;
      if (t.tried)
        std::fprintf(out, "; per_gemm %.2f ms against %s %.2f ms in alternate steps", t.ms,
                     t.against.c_str(), t.against_ms);
      std::fprintf(out, ")");
    }
    if (w.gemm.algo == GemmAlgo::kTuned)
      std::fprintf(out,
                   "; %ld plans, %ld heuristic queries, %ld buckets tuned before the timed steps, "
                   "%ld, %ld and %ld in them (max over ranks)\n",
                   long(g.before_timed.plans), long(g.before_timed.heuristic_queries),
                   long(g.before_timed.tunings), long(g.timed.plans),
                   long(g.timed.heuristic_queries), long(g.timed.tunings));
    else
      std::fprintf(out,
                   "; %ld plans, %ld heuristic queries before the timed steps, %ld and %ld in them "
                   "(max over ranks)\n",
                   long(g.before_timed.plans), long(g.before_timed.heuristic_queries),
                   long(g.timed.plans), long(g.timed.heuristic_queries));
  }
  std::fprintf(out,
               "# workload %s: H=%ld F=%ld E=%ld K=%ld, tokens_per_rank=%ld, dtype %s, precision "
               "%s%s\n",
               w.name.c_str(), long(w.model.hidden), long(w.model.ffn), long(w.model.experts),
               long(w.model.topk), long(w.tokens_per_rank), dtype_name(w.dtype),
               name_of(w.precision),
               w.dispatch_dtype == DispatchDtype::kFp8 ? ", dispatch_dtype fp8" : "");
  std::fprintf(out, "# knobs: %s\n", describe_how_keys(w).c_str());
  std::fprintf(out, "# router %s%s%s, scaling %g, groups %ld/%ld, bias %s, aux %g, z %g\n",
               name_of(w.router.score), w.router.softmax_after_topk ? " (softmax after top-k)" : "",
               w.router.normalize_topk ? ", normalized" : "", w.router.scaling,
               long(w.router.group_topk), long(w.router.groups),
               w.router.expert_bias ? "on" : "off", w.router.aux_coeff, w.router.z_coeff);
  std::fprintf(out, "# routing %s", name_of(w.routing.mode));
  if (w.routing.mode == RoutingMode::kPowerlaw) std::fprintf(out, " (skew %g)", w.routing.skew);
  if (w.routing.mode == RoutingMode::kHot)
    std::fprintf(out, " (%g of tokens to %ld hot experts)", w.routing.hot_fraction,
                 long(w.routing.hot_experts));
  if (w.capacity_factor > 0)
    std::fprintf(out, ", capacity_factor %g (%ld rows per expert per rank%s, drop by %s)",
                 w.capacity_factor, long(r.routing.capacity_rows),
                 step_chunks(w) > 1 ? " and chunk" : "", name_of(w.drop_policy));
  else
    std::fprintf(out, ", dropless");
  if (w.align > 1) std::fprintf(out, ", align %ld", long(w.align));
  if (r.routing.first_step_rank_load_placed > 0)
    std::fprintf(out,
                 ", experts placed by the first step's rows (rows per EP rank max/mean %.3f, "
                 "contiguous %.3f)",
                 r.routing.first_step_rank_load_placed, r.routing.first_step_rank_load_contiguous);
  std::fprintf(out, "\n");
  std::fprintf(out, "# mesh %d ranks = ep %d x fsdp %d, %ld warm-up", r.mesh.world, r.mesh.ep,
               r.mesh.fsdp, long(r.warmup_steps));
  if (w.warmup_s > 0)
    std::fprintf(out, " (+ %ld to last warmup_s %.1f s)", long(r.settle_steps), w.warmup_s);
  std::fprintf(out, " + %ld timed steps, seed %llu\n", long(r.timed_steps),
               (unsigned long long)w.seed);
  std::fprintf(out, "# roofline: %s\n", describe(r.calibration).c_str());
  std::fprintf(out, "#\n# %-18s %10s %10s %10s %7s %9s %9s %9s %9s %6s %-7s\n", "phase",
               "median ms", "p10", "p90", "share%", "TFLOP/s", "algbw GB/s", "busbw", "floor ms",
               "eff%", "bound");
  for (const PhaseResult& p : r.phases) {
    const double share =
        p.in_step && r.step_ms.median > 0 ? 100 * p.ms.median / r.step_ms.median : 0;
    char tf[16] = "", alg[16] = "", bus[16] = "", sh[16] = "", fl[16] = "", eff[16] = "";
    if (p.flops > 0)
      std::snprintf(tf, sizeof tf, "%.3f", rate(p.flops / r.mesh.world, p.ms.median) * 1e-12);
    if (p.bytes > 0) {
      std::snprintf(alg, sizeof alg, "%.3f", rate(p.bytes, p.ms.median) * 1e-9);
      std::snprintf(bus, sizeof bus, "%.3f", rate(p.bytes, p.ms.median) * 1e-9 * p.bus_factor);
    }
    if (p.in_step) std::snprintf(sh, sizeof sh, "%.1f", share);
    floor_cells(p.floor_ms, p.ms.median, fl, eff);
    std::fprintf(out, "  %s%-18s %10.3f %10.3f %10.3f %7s %9s %9s %9s %9s %6s %-7s\n",
                 p.in_step ? "" : " ", p.name.c_str(), p.ms.median, p.ms.p10, p.ms.p90, sh, tf, alg,
                 bus, fl, eff, p.floor_ms > 0 ? p.floor_bound.c_str() : "");
  }
  char fl[16] = "", eff[16] = "";
  floor_cells(r.step_floor_ms, r.step_ms.median, fl, eff);
  std::fprintf(out, "  %-18s %10.3f %10.3f %10.3f %7s %9s %9s %9s %9s %6s\n", "step",
               r.step_ms.median, r.step_ms.p10, r.step_ms.p90, "", "", "", "", fl, eff);
  for (const PhaseResult& p : r.phases)
    if (!p.beside.empty())
      std::fprintf(out,
                   "# overlap: %s runs beside %s (overlap key), so the shares add to more than "
                   "100%%\n",
                   p.name.c_str(), p.beside.c_str());
  print_lanes(r.lanes, out);
  print_rank_spread(r, out);
  print_host(r.host, out);
  print_clocks(r.clocks, out, "the timed steps");
  print_drift(r.step_drift, out);
  if (r.workload.fp8_weights == Fp8Weights::kCached && r.fp8_weight_quantize_ms < 0)
    std::fprintf(out,
                 "# fp8_weights cached: this backend (%s) quantizes the weights inside each GEMM, "
                 "so its steps still do (nothing is cached there)\n",
                 r.backend.c_str());
  else if (r.fp8_weight_quantize_ms >= 0)
    std::fprintf(out,
                 "# fp8_weights cached: the steps reuse the weights' FP8 codes; one quantization "
                 "of them, timed alone, takes %.3f ms (once per optimizer step: over M "
                 "microbatches a step costs step + %.3f / M)\n",
                 r.fp8_weight_quantize_ms, r.fp8_weight_quantize_ms);
  std::fprintf(out, "#\n# throughput: %.0f tokens/s, %.4f TFLOP/s per rank (model FLOPs)\n",
               rate(r.tokens_per_step, r.step_ms.median),
               rate(r.model_flops_per_step / r.mesh.world, r.step_ms.median) * 1e-12);
  print_roofline_footer(r, out);
  std::fprintf(out,
               "# routing: rows per expert min %.1f mean %.1f max %.1f (max/mean %.2f, %ld empty); "
               "rows received per rank min %.1f max %.1f (max/mean %.2f)\n",
               r.routing.rows_per_expert.min, r.routing.rows_per_expert.mean,
               r.routing.rows_per_expert.max, r.routing.load_max_over_mean,
               long(r.routing.experts_without_tokens), r.routing.rows_received_per_rank.min,
               r.routing.rows_received_per_rank.max, r.routing.rank_load_max_over_mean);
  const RoutingStats& rs = r.routing;
  if (w.capacity_factor > 0 || w.align > 1) {
    const double kept = rs.rows_routed_per_step - rs.rows_dropped_per_step;
    std::fprintf(out,
                 "# capacity: %.1f of %.0f rows dropped per step (%.2f%%); align: %.1f zero rows "
                 "added per step (%.2f%% more expert GEMM rows)\n",
                 rs.rows_dropped_per_step, rs.rows_routed_per_step,
                 rs.rows_routed_per_step > 0
                     ? 100 * rs.rows_dropped_per_step / rs.rows_routed_per_step
                     : 0.0,
                 rs.rows_padded_per_step, kept > 0 ? 100 * rs.rows_padded_per_step / kept : 0.0);
  }
  // Where the grouped kernel ran a row GEMM (its method name, FP8 ones prefixed by the recipe).
  bool grouped_rows = false;
  for (ExpertGemm g :
       {ExpertGemm::kUp, ExpertGemm::kDown, ExpertGemm::kDgradA, ExpertGemm::kDgradX})
    grouped_rows = grouped_rows || r.gemm.methods[size_t(g)].find(
                                       name_of(GemmMethod::kGroupedSm90)) != std::string::npos;
  if (rs.tile_rows_over_rows > 0 && grouped_rows)
    std::fprintf(out,
                 "# tiles: in %d-row tiles (the grouped kernel's row GEMMs) the experts' rows take "
                 "%.2fx their count: %.1f%% of the tiles' rows lie past an expert's last row, "
                 "multiplied and not stored\n",
                 kGroupedTileRows, rs.tile_rows_over_rows, 100 * (1 - 1 / rs.tile_rows_over_rows));
  std::fprintf(out, "# memory: high-water %.1f MiB per rank (backend), peak RSS %.1f MiB\n",
               r.memory_high_water_bytes / 1048576.0, r.host_peak_rss_bytes / 1048576.0);
  if (r.checks.empty()) {
    std::fprintf(out, "# check: off\n");
    std::fflush(out);
    return;
  }
  const CheckResult& c = r.checks.front();
  std::fprintf(out, "#\n# correctness at step %ld vs the reference (%s, %.1f s)\n", long(c.step),
               c.reference.c_str(), c.reference_seconds);
  // With FP8, a column for information: the distance to the step without quantization.
  const bool vs_bf16 = w.precision != Precision::kBf16 && w.check_unquantized;
  if (vs_bf16)
    std::fprintf(out,
                 "# (%s: checked against the same quantization; \"vs bf16\" is the distance "
                 "to the unquantized reference, what FP8 costs)\n",
                 name_of(w.precision));
  if (w.precision != Precision::kBf16 && !w.check_unquantized)
    std::fprintf(out,
                 "# (%s: checked against the same quantization; check_unquantized false: the "
                 "distance to the unquantized reference not measured)\n",
                 name_of(w.precision));
  std::fprintf(out, "# %-9s %12s %12s %10s%s  %s\n", "tensor", "rel_l2", "max_abs", "tol",
               vs_bf16 ? "      vs bf16" : "", "result");
  int passed = 0, total = 0;
  for (const TensorCheck& t : c.tensors) {
    char unquantized[32] = "";
    if (vs_bf16) std::snprintf(unquantized, sizeof unquantized, " %12.3e", t.rel_l2_unquantized);
    std::fprintf(out, "  %-9s %12.3e %12.3e %10.1e%s  %s\n", t.name.c_str(), t.rel_l2, t.max_abs,
                 t.tol, unquantized, t.pass ? "PASS" : (t.nonfinite ? "FAIL (NaN/Inf)" : "FAIL"));
    passed += t.pass;
    ++total;
  }
  std::fprintf(out, "  %-9s %ld of %ld tokens differ (%ld near ties allowed)", "routing",
               long(c.routing.mismatches), long(c.routing.tokens), long(c.routing.near_ties));
  if (w.capacity_factor > 0)
    std::fprintf(out, "; %ld dropped rows differ (%ld near ties allowed)",
                 long(c.routing.drop_mismatches), long(c.routing.drop_near_ties));
  std::fprintf(out, "  %s\n", c.routing.pass ? "PASS" : "FAIL");
  passed += c.routing.pass;
  ++total;
  // Over every checked step: a near tie taken at a later step must show even though the table
  // above is the first step's.
  Fp8ScaleTiesCheck scales;
  for (const CheckResult& k : r.checks) {
    if (k.fp8_scales.reported < 0) continue;
    scales.reported = std::max<int64_t>(scales.reported, 0) + k.fp8_scales.reported;
    scales.adopted += k.fp8_scales.adopted;
    scales.adopted_max_rel = std::max(scales.adopted_max_rel, k.fp8_scales.adopted_max_rel);
  }
  const std::string over =
      r.checks.size() > 1 ? " over the " + std::to_string(r.checks.size()) + " checked steps" : "";
  if (scales.reported == 0)
    std::fprintf(out, "# fp8 scales: the backend reports none, the reference's own taken\n");
  if (scales.reported > 0) {
    std::fprintf(out, "# fp8 scales: %ld of the %ld per-tensor scales the backend reported%s taken",
                 long(scales.adopted), long(scales.reported), over.c_str());
    if (scales.adopted > 0)
      std::fprintf(out, " at near ties, up to %.2f%% from the reference's own",
                   100.0 * scales.adopted_max_rel);
    std::fprintf(out, "\n");
  }
  int steps_failed = 0;
  for (const CheckResult& k : r.checks) steps_failed += !k.pass;
  if (r.checks.size() > 1) {
    std::fprintf(out, "# checked %zu steps, %d failed\n", r.checks.size(), steps_failed);
    print_worst_steps(r.checks, out);
  }
  // MATH.md's relative tolerances hold for sums over many tokens: over a handful, one token's
  // dp = <dout, y> can cancel below its bf16 rounding and fail a correct backend's router
  // gradient (docs/correctness.md). Said beside a failure it may explain; the verdict stands.
  const int64_t tokens = w.tokens_per_rank * r.mesh.world;
  if (!r.pass() && tokens < kFewCheckedTokens)
    std::fprintf(out,
                 "# note: %ld tokens in all; over so few a token's dp = <dout, y> can cancel below "
                 "bf16 rounding and fail the router gradient's check on a correct backend "
                 "(docs/correctness.md): check with tens of tokens or more\n",
                 long(tokens));
  // Found by scripts/fuzz_workloads.py: top-1, normalized, an aux loss over balanced routing
  // (docs/correctness.md). The verdict stands.
  if (tensor_failed(r.checks, "dw_gate") && gate_gradient_is_zero(w))
    std::fprintf(out,
                 "# note: dw_gate is zero in exact arithmetic here (one expert a token at a "
                 "constant weight; no z loss; an aux loss, if any, over balanced routing), so "
                 "its relative error compares rounding noise on both sides "
                 "(docs/correctness.md)\n");
  std::fprintf(out, "# check: %d/%d %s\n", passed, total, r.pass() ? "PASS" : "FAIL");
  std::fflush(out);
}

void check_json_target(const std::string& path) {
  if (path == "-") return;  // stdout
  namespace fs = std::filesystem;
  std::error_code ec;
  MOE_USER_CHECK(!fs::is_directory(path, ec),
                 "--out " << path << " is a directory; give a file name, e.g. --out " << path
                          << "/result.json");
  const fs::path parent = fs::absolute(path, ec).parent_path();
  MOE_USER_CHECK(fs::is_directory(parent, ec), "--out " << path << ": directory " << parent.string()
                                                        << " does not exist; create it first");
  check_can_write_in(parent.string(), "--out " + path);
}

void check_can_write_in(const std::string& dir, const std::string& what) {
  // Permission bits say little (root writes anywhere, a read-only mount refuses root): a probe
  // file created and removed says whether files can be written there.
  namespace fs = std::filesystem;
  const fs::path probe = fs::path(dir) / (".moebench-probe." + std::to_string(::getpid()));
  {
    std::ofstream f(probe);
    MOE_USER_CHECK(f.good(), what << ": cannot write in " << dir << " (" << std::strerror(errno)
                                  << "); choose a writable directory");
  }
  std::error_code ec;
  fs::remove(probe, ec);
}

void write_json_atomically(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  try {
    std::ofstream f(tmp);
    MOE_CHECK(f.good(), "cannot open " << tmp << " for writing: " << std::strerror(errno));
    f << j.dump(2) << "\n";
    f.flush();
    MOE_CHECK(f.good(), "failed writing " << tmp);
    f.close();
    std::filesystem::rename(tmp, path, ec);
    MOE_CHECK(!ec, "cannot rename " << tmp << " to " << path << ": " << ec.message());
  } catch (...) {
    std::filesystem::remove(tmp, ec);  // never a temporary file left beside the target
    throw;
  }
}

}  // namespace moe
