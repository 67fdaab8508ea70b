#pragma once
// Everything a run produced, gathered on rank 0: what the report prints and the result JSON holds.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "app/calibrate.h"
#include "app/launch.h"
#include "core/check.h"
#include "core/clocks.h"
#include "core/mesh.h"
#include "core/ops.h"
#include "core/stats.h"
#include "core/workload.h"

namespace moe {

struct PhaseResult {
  int phase = -1;  // Phase (core/moe_layer.h); -1 for one read back from a result file
  std::string name;
  Summary ms;             // per step: max over ranks
  Summary rank_spread;    // per step: max over ranks less min over ranks (ms)
  double flops = 0;       // per step, whole world (0 for communication-only phases)
  double bytes = 0;       // per step, per rank, for bandwidth (0 for compute-only phases)
  double bus_factor = 0;  // busbw = algbw * bus_factor (nccl-tests conventions)
  bool in_step = true;    // partitions the step (false: a part of another phase)
  // The in-step phase this one runs beside (the overlap key), "" if none: their times overlap, and
  // the step's floor counts the larger of their floors.
  std::string beside;
  double floor_ms = 0;      // the least time on this machine (app/roofline.h); 0: no floor
  std::string floor_bound;  // what sets floor_ms: "compute", "memory" or "network"
  // Per step, per rank: backend-memory bytes the phase must read and write at the least (the
  // experts: weights, weight gradients, the rows in and out); 0 where not modelled.
  double mem_bytes = 0;
  bool fp8 = false;  // its GEMMs run in FP8: the compute floor takes the FP8 rate (PhaseCost::fp8)
  // a2a_* phases: bytes this rank actually sent to other ranks per step (mean over timed steps,
  // max over ranks); `bytes` is the nominal send buffer, own rows included.
  std::optional<double> bytes_sent;
};

struct RoutingStats {
  Summary rows_per_expert;         // c_e over the world, averaged over timed steps
  Summary rows_received_per_rank;  // over ranks, averaged over timed steps
  double load_max_over_mean = 0;   // max_e c_e / mean_e c_e
  int64_t experts_without_tokens = 0;
  double rank_load_max_over_mean = 0;  // rows received: max over ranks / mean
  // Per step over the world, averaged over timed steps: rows routed (N*K), dropped by the
  // capacity, and zero rows added by align. capacity_rows: per source rank and expert (0: none).
  double rows_routed_per_step = 0, rows_dropped_per_step = 0, rows_padded_per_step = 0;
  int64_t capacity_rows = 0;
  // Rows of a token that reached other EP ranks in the dispatch direction (world mean over the
  // timed steps): about K (ep - 1) / ep for alltoall, ep - 1 for allgather.
  double rows_per_token_to_others = 0;
  // expert_placement balanced at ep > 1: the first step's rows per EP rank, max over mean, as
  // contiguous placement would have them and as placed (0 and 0 where no placement moved experts).
  double first_step_rank_load_contiguous = 0, first_step_rank_load_placed = 0;
  // The rows the grouped kernel's row GEMMs multiply (each expert's rows at its rank rounded up
  // to whole kGroupedTileRows tiles) over the rows routed, summed over the timed steps; 0 where
  // not computed (a capacity: its drops are not in the counts).
  double tile_rows_over_rows = 0;
};

// gemm.method auto's mix of each GEMM's fastest method (app/gemm_choice.h), tried against the
// fastest single method in alternate warm-up steps.
struct PerGemmTry {
  bool tried = false;             // the mix differed from `against`, so it was tried
  ExpertGemmMethods methods;      // each GEMM's method in the mix
  std::string against;            // the method whose experts phases were fastest in its own tries
  double ms = 0, against_ms = 0;  // each one's better try in the alternate steps (experts ms)
};

// The expert GEMMs as the timed steps ran them.
struct GemmReport {
  // The backend's method name, or per_gemm where the expert GEMMs run by different methods; ""
  // where the backend has one way (the CPU backend).
  std::string method;
  ExpertGemmMethods methods;  // each expert GEMM's method ("" as above)
  // Each method's better warm-up try (experts fwd+bwd ms, max over ranks) when the warm-up chose
  // (gemm.method auto with two or more methods); empty otherwise.
  std::map<std::string, double> warmup_experts_ms;
  // Per method, each expert GEMM's better time in its tries (ms, max over ranks), as above.
  std::map<std::string, std::map<std::string, double>> warmup_gemm_ms;
  PerGemmTry warmup_per_gemm;  // as above
  // Untimed steps added to the workload's warm-up so that each method is tried twice, and the
  // choice then warms up as a fixed method would.
  int64_t added_warmup_steps = 0;
  // GEMM plans built and heuristic queries made (max over ranks) before the timed steps and in
  // them: planning in a timed step is host work inside its time.
  GemmPlanCounts before_timed, timed;
};

// What the lanes did per step (core/lane_times.h): each lane's busy time, the dispatchers'
// collectives (the a2a_* phases, whichever lane ran them) and the part of those no work on the
// other lane hid. Each per step the maximum over ranks, summarised over the timed steps; but
// kA2aLeastRank, the collectives' time on the rank that spent least in them, per step the minimum
// over ranks: a collective ends on every rank together, so a rank that arrives early waits there
// for the last one, and the last one's time is about the transfers' (the difference from kA2a is
// the wait for slower ranks' work before it, or uneven bytes).
enum LaneFigure { kMainBusy, kSideBusy, kA2a, kA2aExposed, kA2aLeastRank, kNumLaneFigures };
struct LaneReport {
  Summary figures[kNumLaneFigures];
};

// The host's side of the timed steps, each step's figure the maximum over ranks: ms from a step's
// start until all of its work was issued (what launching costs, and what a graph saves), and how
// often the host waited for the device in that time (0: the step is sync-free). How the steps
// ran: "graph" (a CUDA graph captured in warm-up, replayed), "sync-free" (graph: true on a
// backend that cannot capture: the same step, issued) or "issued".
struct HostReport {
  Summary issue_ms;
  double waits_per_step = 0;  // mean over the timed steps
  std::string step = "issued";
};

// Per-step samples kept in a result (10^4 x 19 series at most: well under a few MB of JSON).
constexpr size_t kMaxSamples = 10000;

struct RunResult {
  std::string backend;
  std::map<std::string, std::string> backend_info;  // device, CUDA and NCCL versions
  GemmReport gemm;
  std::string command_line;
  std::vector<RankPlace> places;  // every rank's host and GPU
  bool profile = false;           // --profile: the timed steps ran under cudaProfilerStart/Stop
  Workload workload;
  Mesh mesh;
  int64_t timed_steps = 0, warmup_steps = 0;
  int64_t settle_steps = 0;  // untimed steps run for warmup_s after the warm-up
  Summary step_ms;
  Drift step_drift;  // of the timed steps' times (max over ranks), in order
  // Every timed step's time (max over ranks), by phase name and "step", at most kMaxSamples
  // evenly spaced: what compare's rank test reads.
  std::map<std::string, std::vector<double>> samples_ms;
  std::vector<PhaseResult> phases;
  LaneReport lanes;
  HostReport host;
  ClocksReport clocks;
  Calibration calibration;          // done = false when the workload's roofline is off
  double step_floor_ms = 0;         // sum of the in-step phases' floors
  double model_flops_per_step = 0;  // whole world
  double tokens_per_step = 0;       // whole world
  RoutingStats routing;
  int64_t memory_high_water_bytes = 0;         // max over ranks, backend memory
  int64_t host_peak_rss_bytes = 0;             // max over ranks
  std::vector<CheckResult> checks;             // empty when check is off
  std::map<std::string, std::string> digests;  // tensor -> hex digest over the world (last step)
  std::string digest_function;                 // core/digest.h's kDigestFunction
  // fp8_weights cached: one quantization of the weights, timed alone (median, max over ranks);
  // -1 where the steps quantize their own (per_step, or a backend that quantizes inside each
  // GEMM).
  double fp8_weight_quantize_ms = -1;
  bool pass() const;
};

}  // namespace moe
