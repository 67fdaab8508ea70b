#include "app/run_command.h"

#include <mpi.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "app/all_ranks.h"
#include "app/backend.h"
#include "app/calibrate.h"
#include "app/catalog.h"
#include "app/dry_run.h"
#include "app/dump.h"
#include "app/gemm_choice.h"
#include "app/launch.h"
#include "app/report.h"
#include "app/roofline.h"
#include "app/run_result.h"
#include "core/bounded_wait.h"
#include "core/check.h"
#include "core/cost_model.h"
#include "core/digest.h"
#include "core/error.h"
#include "core/grouped_gemm.h"
#include "core/mesh.h"
#include "core/moe_layer.h"
#include "core/parallel.h"
#include "core/placement.h"
#include "core/reference.h"
#include "core/routing_modes.h"
#include "core/saturating.h"

namespace moe {
namespace {

// What to change where the step's buffers do not fit, by their largest part (--dry-run lists
// them): the experts' weights and gradients are split over the EP group, the rows are the rank's
// tokens times K whatever the mesh.
std::string step_memory_fix(const MemoryNeed& need) {
  const StepMemory& p = need.step;
  const int64_t experts = saturating_sum({p.weights, p.gradients, p.shared_experts});
  const int64_t rows = saturating_sum({p.expert_rows, p.tokens, p.dispatcher});
  std::ostringstream fix;
  if (p.fp8 > std::max(experts, rows))
    fix << "raise mesh.ep (the FP8 codes of the rank's expert weights take " << (p.fp8 >> 20)
        << " MiB of it) or set precision=bf16";
  else if (experts >= rows)
    fix << "raise mesh.ep, or lower model.experts or model.ffn (the experts' weights and "
           "gradients take "
        << (experts >> 20) << " MiB of it)";
  else
    fix << "lower tokens_per_rank (the expert rows and token buffers take " << (rows >> 20)
        << " MiB of it)";
  return fix.str();
}

// Refuses a workload whose buffers cannot fit before allocating anything. The reference lives in
// host memory (float64, every expert), or with reference on the GPU mostly in device memory.
// dump_bytes: the host copies a --dump makes (every local expert's weights and gradients).
void check_memory(const Workload& w, int world_size, const std::string& backend, int64_t dump_bytes,
                  MPI_Comm world) {
  const MemoryNeed need = estimate_memory_need(w, world_size, backend);
  const ReferenceBytes& ref_need = need.check;
  const bool ref_on_gpu = reference_device(backend, w) == "gpu";
  const int64_t step_need = need.step.total() + ref_need.device;
  const int64_t step_avail = backend_memory_available(backend, world);
  const int64_t host_avail = backend_memory_available("cpu", world);
  const int64_t host_need =
      (backend == "cpu" ? step_need + ref_need.host : ref_need.host) + dump_bytes;
  MOE_USER_CHECK(backend == "cpu" || step_avail == 0 || step_need <= step_avail,
                 "workload needs about "
                     << (step_need >> 20) << " MiB of GPU memory per rank ("
                     << (ref_need.device >> 20) << " MiB of it the GPU reference) but "
                     << (step_avail >> 20) << " MiB is free: " << step_memory_fix(need)
                     << (ref_need.device > 0 ? ", or set check=off" : "")
                     << " (--dry-run breaks the memory down)");
  MOE_USER_CHECK(
      host_avail == 0 || host_need <= host_avail,
      "workload needs about "
          << (host_need >> 20) << " MiB of host memory per rank "
          << (backend == "cpu" ? "" : "(the check: its reference and the results' host copies) ")
          << (dump_bytes > 0
                  ? "(" + std::to_string(dump_bytes >> 20) + " MiB of it the --dump's copies) "
                  : std::string())
          << "but only " << (host_avail >> 20) << " MiB per rank is available: "
          << (backend == "cpu" ? step_memory_fix(need) : "lower tokens_per_rank")
          << (w.check == CheckMode::kOff || ref_on_gpu || backend == "cpu" ? ""
                                                                           : ", set reference=gpu")
          << (w.check == CheckMode::kOff
                  ? ""
                  : ", or set check to \"off\" (the float64 reference holds every "
                    "expert)")
          << " (--dry-run breaks the memory down)");
}

// One digest per tensor over the whole world: each rank digests its part where it lives, then
// the parts' digests are digested in rank order. Equal digests across runs mean bitwise identical
// results.
std::map<std::string, std::string> world_digests(MoeLayer& layer, MPI_Comm world,
                                                 double timeout_s) {
  int size = 1;
  MPI_Comm_size(world, &size);
  std::map<std::string, std::string> digests;
  for (const auto& [name, mine] : layer.digest_outputs()) {
    std::vector<uint64_t> all(size);
    allgather_bounded(&mine, all.data(), 1, MPI_UINT64_T, world, "the digests' gather", timeout_s);
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx",
                  (unsigned long long)digest_bytes(all.data(), all.size() * sizeof(uint64_t)));
    digests[name] = hex;
  }
  return digests;
}

// The workload file (or committed workload) with the command line's --set, --steps and --warmup
// applied.
Workload workload_from_options(const RunOptions& opt) {
  Workload w = load_workload_file(resolve_config(opt.config, committed_configs_dir()));
  for (const std::string& s : opt.sets) apply_override(w, s);
  if (opt.steps >= 0) apply_override(w, "steps=" + std::to_string(opt.steps));
  if (opt.warmup >= 0) apply_override(w, "warmup=" + std::to_string(opt.warmup));
  return w;
}

// Test hook for "a rank that fails never leaves the others waiting": MOE_FAULT=RANK:STEP:throw
// makes that rank throw an internal error before that step, MOE_FAULT=RANK:STEP:exit makes it
// die without a word (as a crashed process would), MOE_FAULT=RANK:STEP:stop makes it stop itself
// (SIGSTOP: alive but stuck, as a livelocked one). Unset in normal use; a malformed value is a
// usage error (a test that meant to inject a fault must not pass because none was injected).
struct FaultPlan {
  int rank = -1;
  int64_t step = -1;
  std::string how;  // "throw" | "exit" | "stop"; "" = no fault
};

FaultPlan fault_plan_from_env() {
  FaultPlan f;
  const char* v = std::getenv("MOE_FAULT");
  if (!v) return f;
  int rank = -1, used = 0;
  long long step = -1;
  char how[16] = {0};
  const bool parsed =
      std::sscanf(v, "%d:%lld:%15[a-z]%n", &rank, &step, how, &used) == 3 && v[used] == '\0' &&
      rank >= 0 && step >= 0 &&
      (std::string(how) == "throw" || std::string(how) == "exit" || std::string(how) == "stop");
  MOE_USER_CHECK(parsed, "MOE_FAULT=" << v
                                      << ": expected RANK:STEP:throw, RANK:STEP:exit or "
                                         "RANK:STEP:stop (a test hook that makes one rank fail; "
                                         "unset it in normal use)");
  f.rank = rank;
  f.step = step;
  f.how = how;
  return f;
}

void inject_fault(const FaultPlan& f, int rank, int64_t step) {
  if (f.how.empty() || f.rank != rank || f.step != step) return;
  if (f.how == "exit") std::_Exit(9);
  if (f.how == "stop") std::raise(SIGSTOP);
  MOE_CHECK(false, "fault injected by MOE_FAULT=" << f.rank << ":" << f.step << ":" << f.how);
}

// L = sum over the world's tokens of <out, dout> + aux + z, from host copies (float64 sum).
double world_loss(const StepOutputs& o, MPI_Comm world, double timeout_s) {
  double dot = 0.0;
  for (size_t i = 0; i < o.out.size(); ++i) dot += double(o.out[i]) * double(o.dout[i]);
  allreduce_bounded(&dot, 1, MPI_DOUBLE, MPI_SUM, world, "the loss's sum", timeout_s);
  return dot + o.aux + o.z;
}

// Reference p in the backend's idx order (0 where the backend chose an expert the reference did
// not), so that p compares index by index whatever the order inside the top-k.
std::vector<double> ref_p_in_backend_order(const std::vector<int32_t>& got_idx,
                                           const ReferenceResult& ref, int64_t T, int64_t K) {
  std::vector<double> p(T * K, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < K; ++j)
        if (ref.idx[t * K + j] == got_idx[t * K + k]) p[t * K + k] = ref.p[t * K + j];
  return p;
}

// The local experts [first, second) this rank checks: the fsdp ranks of one EP position hold the
// same experts, and each checks its own share of them.
std::pair<int64_t, int64_t> checked_local_experts(const Mesh& mesh) {
  const int64_t El = mesh.experts_per_rank;
  return {El * mesh.fsdp_rank / mesh.fsdp, El * (mesh.fsdp_rank + 1) / mesh.fsdp};
}

// This rank's sums of the expert weight gradients' comparison, added to as the reference hands
// over each checked expert's (ReferenceInputs::expert_grads).
struct ExpertGradSums {
  TensorSums in, out;
};

// The backend's gradients of expert e (a global id, held by this rank) as floats, dw_in [H, 2F]
// and dw_out [F, H] (MoeLayer::download_expert_grads).
using ExpertGradReader =
    std::function<void(int64_t e, std::vector<float>& dw_in, std::vector<float>& dw_out)>;

// How far a long reference is (DeepSeek-V3's: minutes), said at most every 15 s: the experts whose
// gradients it has handed over, most of its work. Silent where `say` is false (ranks but 0,
// --quiet).
struct ReferenceProgress {
  std::string what;
  int64_t total = 0;
  bool say = false;
  int64_t done = 0;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), last = start;
  void expert_done() {
    ++done;
    const auto now = std::chrono::steady_clock::now();
    if (!say || now - last < std::chrono::seconds(15)) return;
    last = now;
    spdlog::info("check: {} has compared {} of {} experts' gradients ({:.0f} s)", what, done, total,
                 std::chrono::duration<double>(now - start).count());
  }
};

// A sink that compares each expert's reference gradients, as they come, with the backend's, read
// an expert at a time into buffers kept across experts, adding to sums.
ExpertGradSink compare_expert_grads(const ExpertGradReader& read, ExpertGradSums& sums,
                                    ReferenceProgress& progress) {
  auto got = std::make_shared<std::pair<std::vector<float>, std::vector<float>>>();
  return [got, &read, &sums, &progress](int64_t e, const double* dw_in, const double* dw_out) {
    read(e, got->first, got->second);
    sums.in.add(got->first.data(), dw_in, int64_t(got->first.size()));
    sums.out.add(got->second.data(), dw_out, int64_t(got->second.size()));
    progress.expert_done();
  };
}

// The backend's outputs against one reference result (whose expert weight gradients were
// compared as they came, into dw): every tensor's check, in report order.
std::vector<TensorCheck> compare_outputs(const Workload& w, const Mesh& mesh, MPI_Comm world,
                                         const StepOutputs& o, const ReferenceResult& ref,
                                         const ExpertGradSums& dw, int64_t E_part,
                                         double timeout_s) {
  const int64_t T = w.tokens_per_rank, H = w.model.hidden, F = w.model.ffn, E = w.model.experts,
                K = w.model.topk;
  // Replicated tensors are counted once: dw_gate on rank 0, each expert's grads on one fsdp rank.
  const int64_t n_gate = mesh.rank == 0 ? H * E : 0;
  const std::vector<double> ref_p = ref_p_in_backend_order(o.idx, ref, T, K);
  const double tol_act = tolerance_for("out", w.dtype);
  std::vector<TensorCheck> c;
  c.push_back(compare_tensor("out", o.out.data(), ref.out.data(), T * H,
                             tolerance_for("out", w.dtype), world, timeout_s));
  c.push_back(compare_tensor("dx", o.dx.data(), ref.dx.data(), T * H, tolerance_for("dx", w.dtype),
                             world, timeout_s));
  c.push_back(compare_tensor("dw_gate", o.dw_gate.data(), ref.dw_gate.data(), n_gate,
                             tolerance_for("dw_gate", w.dtype), world, timeout_s));
  // Every checked expert handed over once: a reference that skipped one must not pass.
  MOE_CHECK(dw.in.count == E_part * H * 2 * F && dw.out.count == E_part * F * H,
            "check: the reference handed over " << dw.in.count / (H * 2 * F) << " of " << E_part
                                                << " experts' gradients");
  c.push_back(finish_compare("dw_in", dw.in, tolerance_for("dw_in", w.dtype), world, timeout_s));
  c.push_back(finish_compare("dw_out", dw.out, tolerance_for("dw_out", w.dtype), world, timeout_s));
  if (w.model.shared_experts > 0) {
    c.push_back(compare_replicated("dw_sh_in", o.dw_sh_in, ref.dw_sh_in,
                                   tolerance_for("dw_sh_in", w.dtype), world, timeout_s));
    c.push_back(compare_replicated("dw_sh_out", o.dw_sh_out, ref.dw_sh_out,
                                   tolerance_for("dw_sh_out", w.dtype), world, timeout_s));
  }
  c.push_back(compare_tensor("p", o.p.data(), ref_p.data(), T * K, tol_act, world, timeout_s));
  c.push_back(compare_scalar("aux", o.aux, ref.aux, tol_act));
  c.push_back(compare_scalar("z", o.z, ref.z, tol_act));
  // The loss's error must be what out's, aux's and z's errors explain (compare_loss).
  double dout_sq = 0;
  for (int64_t i = 0; i < T * H; ++i) dout_sq += double(o.dout[i]) * double(o.dout[i]);
  allreduce_bounded(&dout_sq, 1, MPI_DOUBLE, MPI_SUM, world, "the check's dout norm", timeout_s);
  const TensorCheck& out_check = c.front();
  const double dout_norm = std::sqrt(dout_sq);
  const double out_err = out_check.rel_l2 * (out_check.ref_norm > 0 ? out_check.ref_norm : 1.0);
  const double bound = out_err * dout_norm + std::fabs(o.aux - ref.aux) + std::fabs(o.z - ref.z);
  const double scale = out_check.ref_norm * dout_norm + std::fabs(ref.aux) + std::fabs(ref.z);
  c.push_back(compare_loss(o.loss, ref.loss, bound, scale));
  return c;
}

// held: this rank's experts, slot by slot (MoeLayer::local_experts).
CheckResult check_step(const Workload& w, const Mesh& mesh, MPI_Comm world, int64_t step,
                       const StepOutputs& o, const std::vector<int32_t>& held,
                       const ExpertGradReader& read_grads, const ReferenceMathFactory& make_math,
                       double timeout_s, bool say) {
  ReferenceInputs in = reference_inputs(o, step);
  in.timeout_s = timeout_s;
  const auto [checked_begin, checked_end] = checked_local_experts(mesh);
  in.experts = std::vector<int32_t>(held.begin() + checked_begin, held.begin() + checked_end);
  const int64_t E_part = checked_end - checked_begin;
  ExpertGradSums dw;
  ReferenceProgress progress{"the reference", E_part, say};
  in.expert_grads = compare_expert_grads(read_grads, dw, progress);
  double seconds = MPI_Wtime();
  const ReferenceResult ref = compute_reference(w, mesh, world, in, make_math);
  seconds = MPI_Wtime() - seconds;
  allreduce_bounded(&seconds, 1, MPI_DOUBLE, MPI_MAX, world, "the check's timing", timeout_s);

  CheckResult c;
  c.step = step;
  c.reference = ref.math;
  c.reference_seconds = seconds;
  c.tensors = compare_outputs(w, mesh, world, o, ref, dw, E_part, timeout_s);
  if (w.precision != Precision::kBf16 && w.check_unquantized) {
    // For information: how far FP8 lands from the same step without quantization.
    Workload unquantized = w;
    unquantized.precision = Precision::kBf16;
    ExpertGradSums plain_dw;
    ReferenceProgress plain_progress{"the unquantized reference", E_part, say};
    in.expert_grads = compare_expert_grads(read_grads, plain_dw, plain_progress);
    const ReferenceResult plain = compute_reference(unquantized, mesh, world, in, make_math);
    const std::vector<TensorCheck> u =
        compare_outputs(w, mesh, world, o, plain, plain_dw, E_part, timeout_s);
    for (size_t i = 0; i < u.size(); ++i) c.tensors[i].rel_l2_unquantized = u[i].rel_l2;
  }
  c.routing.tokens = w.tokens_per_rank * mesh.world;
  c.routing.mismatches = ref.routing_mismatches;
  c.routing.near_ties = ref.routing_near_ties;
  c.routing.drop_mismatches = ref.drop_mismatches;
  c.routing.drop_near_ties = ref.drop_near_ties;
  c.routing.pass = ref.routing_mismatches == 0 && ref.drop_mismatches == 0;
  if (w.precision == Precision::kFp8Tensor)
    c.fp8_scales = {ref.fp8_scales_reported, ref.fp8_scales_adopted, ref.fp8_scale_adopted_max_rel};
  c.pass = c.routing.pass;
  for (const TensorCheck& t : c.tensors) c.pass = c.pass && t.pass;
  return c;
}

static_assert(kA2aDispatchBwd - kA2aDispatchFwd == kDirDispatchBwd,
              "the a2a_* phases follow DispatchDirection's order");

// The cost model's FLOPs and bytes into the report's phases (rows_kept: over the world per
// step, measured), with the bytes each rank actually sent in the a2a_* phases (per direction: mean
// over timed steps, max over ranks).
void describe_phases(const Workload& w, const Mesh& m, size_t storage_bytes, size_t grad_bytes,
                     double rows_kept, const double (&sent)[kNumDirs],
                     std::vector<PhaseResult>& phases) {
  const std::vector<PhaseCost> costs = phase_costs(w, m, storage_bytes, grad_bytes, rows_kept);
  for (PhaseResult& p : phases) {
    const PhaseCost& c = costs[p.phase];
    p.flops = c.flops;
    p.bytes = c.bytes;
    p.bus_factor = c.bus_factor;
    p.mem_bytes = c.mem_bytes;
    p.fp8 = c.fp8;
    if (p.phase >= kA2aDispatchFwd && p.phase < kA2aDispatchFwd + kNumDirs)
      p.bytes_sent = sent[p.phase - kA2aDispatchFwd];
  }
}

// Each of n values' maximum over the ranks into max and its minimum into min (either may be v
// itself), by one all-reduce of the values and their negations: max(-x) = -min(x).
void allreduce_max_min(const double* v, int n, double* max, double* min, MPI_Comm world,
                       const char* what, double timeout_s) {
  std::vector<double> both(2 * size_t(n));
  for (int i = 0; i < n; ++i) {
    both[i] = v[i];
    both[n + i] = -v[i];
  }
  allreduce_bounded(both.data(), 2 * n, MPI_DOUBLE, MPI_MAX, world, what, timeout_s);
  for (int i = 0; i < n; ++i) {
    max[i] = both[i];
    min[i] = -both[n + i];
  }
}

// Every rank's clock summary on every rank (one gather), from the sampler's samples over the
// timed steps.
ClocksReport gather_clocks(ClockSampler* sampler, const std::string& why_none, MPI_Comm world,
                           double timeout_s) {
  const ClockSummary mine =
      sampler ? summarize_clocks(sampler->finish(), sampler->power_limit_w()) : ClockSummary{};
  int world_size = 0;
  MPI_CHECK(MPI_Comm_size(world, &world_size));
  std::vector<double> packed(kClockSummaryDoubles), all(size_t(world_size) * kClockSummaryDoubles);
  pack_clock_summary(mine, packed.data());
  allgather_bounded(packed.data(), all.data(), kClockSummaryDoubles, MPI_DOUBLE, world,
                    "the all-gather of the clock samples", timeout_s);
  std::vector<ClockSummary> ranks;
  for (int i = 0; i < world_size; ++i)
    ranks.push_back(unpack_clock_summary(all.data() + size_t(i) * kClockSummaryDoubles));
  return clocks_report(std::move(ranks), sampler ? sampler->source() : "the other ranks' sampler",
                       sampler ? "the timed steps ended before a sample was taken" : why_none);
}

}  // namespace

bool RunResult::pass() const {
  for (const CheckResult& c : checks)
    if (!c.pass) return false;
  return true;
}

int run_command(const RunOptions& opt) { return run_command(opt, make_backend); }

int run_command(const RunOptions& opt, const BackendFactory& make_backend_for) {
  MPI_Comm world = MPI_COMM_WORLD;
  int rank = 0, world_size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &world_size);

  Workload w;
  std::string backend;
  if (opt.dry_run || opt.world > 0 || opt.json) {
    const int plan_world = opt.world > 0 ? opt.world : world_size;
    const bool ok = on_all_ranks(world, opt.timeout_s, [&] {
      MOE_USER_CHECK(opt.dry_run || opt.world == 0,
                     "--world " << opt.world << " plans for another world size and "
                                << "needs --dry-run; a run takes mpirun's -np");
      MOE_USER_CHECK(opt.dry_run,
                     "--json prints the plan of --dry-run as JSON: add --dry-run "
                     "(a run's result JSON goes to stdout with --out -)");
      MOE_USER_CHECK(!opt.profile, "--profile brackets a run's timed steps, and --dry-run runs "
                                       << "none: drop one of the two");
      w = workload_from_options(opt);
      resolve_and_validate(w, plan_world);
      // A plan for GPUs may be made where there are none.
      backend = opt.backend == "cuda" ? "cuda" : resolve_backend(opt.backend);
      check_backend_supports(backend, w);
    });
    if (!ok) return 2;
    // The memory warning compares with this host: --world N puts all N ranks on it.
    PlanHost host;
    host.memory_bytes = host_memory_total_bytes();
    if (backend == "cuda") host.gpu_memory_bytes = gpu_memory_total_bytes();
    host.ranks = opt.world > 0 ? opt.world : ranks_on_this_host(world);
    if (rank == 0) print_dry_run(w, dry_run_plan(w, plan_world, backend, host), opt.json);
    return 0;
  }

  Mesh mesh;
  FaultPlan fault;
  const bool ok = on_all_ranks(world, opt.timeout_s, [&] {
    check_git_commit_env();
    fault = fault_plan_from_env();
    w = workload_from_options(opt);
    resolve_and_validate(w, world_size);
    backend = resolve_backend(opt.backend);
    check_backend_supports(backend, w);
    mesh = make_mesh(world_size, rank, w.mesh.ep, w.mesh.fsdp, w.model.experts);
    // Where the results go, before any work: a refused target must not cost a calibration.
    if (!opt.out.empty()) check_json_target(opt.out);
    if (!opt.dump.empty()) check_dump_target(opt.dump);
    const int64_t dump_bytes = opt.dump.empty() ? 0 : dump_bytes_per_rank(w, mesh);
    MOE_USER_CHECK(dump_bytes <= opt.dump_limit_mib << 20,
                   "--dump would write " << (dump_bytes >> 20)
                                         << " MiB per rank, over the limit of "
                                         << opt.dump_limit_mib
                                         << " MiB: raise --dump-limit-mib or shrink the "
                                            "workload (tokens_per_rank, model sizes)");
    check_memory(w, world_size, backend, dump_bytes, world);
  });
  if (!ok) return 2;
  // The host's threads shared out between the ranks on it (core/parallel.h: the references,
  // the check's sums, seeded weights), so that a host's ranks do not each start as many threads
  // as it has; the results are the same with any number.
  int local_ranks = 1;
  local_rank_and_size(world, &local_ranks);
  max_parts() = std::max(1, int(std::thread::hardware_concurrency()) / local_ranks);

  Backend be = make_backend_for(backend, world, mesh, w, opt.timeout_s);
  Device& device = *be.device;
  Ops& ops = *be.ops;
  RunResult r;
  // Before the layer allocates: the calibration's buffers then never share memory with the
  // step's, and once released they leave no trace in the step's high-water mark.
  if (w.roofline) {
    r.calibration = calibrate(device, ops, *be.comm, w.dtype, w.precision, world, opt.timeout_s);
    device.reset_memory_high_water();
    if (rank == 0) spdlog::info("roofline calibration: {}", describe(r.calibration));
  }
  MoeLayer layer(w, mesh, device, ops, *be.comm);
  const ReferenceMathFactory make_math = reference_math_factory(backend, w);
  const bool ref_on_gpu = reference_device(backend, w) == "gpu";
  const Dims& d = layer.dims();
  if (rank == 0)
    spdlog::info("{}: {} ranks, mesh ep={} x fsdp={}, backend {}, T={} H={} F={} E={} K={}", w.name,
                 world_size, mesh.ep, mesh.fsdp, backend, d.T, d.H, d.F, d.E, d.K);

  r.backend = backend;
  r.backend_info = be.info;
  r.gemm.methods = be.gemm_methods;
  r.gemm.method = expert_gemm_methods_name(be.gemm_methods);
  r.places = be.places;
  r.profile = opt.profile;
  r.command_line = opt.command_line;
  r.workload = w;
  r.mesh = mesh;
  r.warmup_steps = w.warmup;
  r.timed_steps = w.steps;
  std::vector<std::vector<double>> samples(kNumPhases);
  // Per timed step and phase: the slowest rank's ms less the fastest's.
  std::vector<std::vector<double>> spread_samples(kNumPhases);
  std::vector<double> ms_least(kNumPhases);  // a step's phase times on the fastest rank
  // Per timed step, max over ranks: each lane's busy ms, the a2a phases' and their exposed part;
  // and the a2a phases' min over ranks.
  std::vector<std::vector<double>> lane_samples(kNumLaneFigures);
  std::vector<double> host_issue_samples;  // per timed step, max over ranks
  double host_waits = 0;                   // summed over timed steps, max over ranks each
  std::vector<double> expert_rows(d.E, 0.0), rank_rows(world_size, 0.0);
  double rows_dropped = 0, rows_padded = 0;  // world sums over the timed steps
  GroupedTileRows tile_rows(w.capacity_factor == 0, mesh.fsdp);
  // Bytes this rank sent to other EP ranks per direction, and rows of its tokens the dispatch
  // sent them, summed over timed steps.
  double bytes_sent[kNumDirs] = {}, rows_to_others = 0;
  std::vector<double> ms;
  auto last_progress = std::chrono::steady_clock::now();
  GemmMethodChoice gemm_choice(ops.expert_gemm_methods(), w.warmup);
  const int64_t untimed = gemm_choice.untimed_steps();  // the warm-up, tries, choice's warm-up
  const int64_t total = untimed + w.steps;
  r.gemm.added_warmup_steps = gemm_choice.added_steps();
  if (gemm_choice.added_steps() > 0 && rank == 0)
    spdlog::info(
        "gemm.method auto: trying each of {} methods twice, then the per-GEMM mix against the "
        "fastest twice each, then the choice's own warm-up of {} steps: {} untimed steps, {} "
        "more than the warm-up (set gemm.method to run none)",
        ops.expert_gemm_methods().size(), w.warmup, untimed, gemm_choice.added_steps());

  // --profile: the profiler records the timed steps only, not the set-up, warm-up, check or dump
  // (a profiler that replays kernels would spend most of its time on the check's), so that a
  // profile is the steady state the report times.
  bool profiling = false;
  auto profile = [&](bool on) {
    if (!opt.profile || on == profiling) return;
    if (on)
      device.profiler_start();
    else
      device.profiler_stop();
    profiling = on;
  };
  // The GPU's clocks and power, sampled over the stretches the profiler records.
  std::string clocks_why_none;
  std::unique_ptr<ClockSampler> clocks = device.make_clock_sampler(clocks_why_none);
  // The timed steps' stretches, the check and the dump outside them.
  auto timed_stretch = [&](bool on) {
    profile(on);
    if (clocks) clocks->set_on(on);
  };
  if (opt.profile && rank == 0) {
    if (backend == "cuda")
      spdlog::info(
          "profile: cudaProfilerStart/Stop bracket the timed steps (steps {} to {}), the profiler "
          "off while the check or dump runs; every phase is an NVTX range",
          untimed, total - 1);
    else
      spdlog::info("profile: the {} backend has no profiler to start; --profile is recorded only",
                   backend);
  }

  // Loads a step's inputs, then starts every rank together (as nccl-tests does), so that no
  // phase's time holds another rank's untimed host work (drawing the inputs).
  auto start_step = [&](int64_t input_step) {
    layer.load_step_inputs(input_step);
    device.sync();
    barrier_bounded(world, "the barrier before a step", opt.timeout_s);
  };

  // warmup_s: before the first timed step, untimed steps like it (its inputs; the graph, where
  // one was captured) until warmup_s seconds have passed since the first step. Every rank goes by
  // the slowest's clock, so all run the same steps.
  const auto run_begin = std::chrono::steady_clock::now();
  auto settle = [&]() {
    if (w.warmup_s <= 0) return;
    if (rank == 0 && !opt.quiet)
      spdlog::info("warm-up: untimed steps until {:.1f} s after the first (warmup_s)", w.warmup_s);
    ops.time_expert_gemms(false);
    for (;;) {
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - run_begin).count();
      allreduce_bounded(&elapsed, 1, MPI_DOUBLE, MPI_MAX, world, "the warm-up's elapsed time",
                        opt.timeout_s);
      if (elapsed >= w.warmup_s) break;
      const auto now = std::chrono::steady_clock::now();
      if (rank == 0 && !opt.quiet && now - last_progress > std::chrono::seconds(5)) {
        last_progress = now;
        spdlog::info("warm-up: {:.0f} of {:.0f} s, {} steps added", elapsed, w.warmup_s,
                     r.settle_steps);
      }
      start_step(gemm_choice.input_step(untimed));
      layer.run_step(ms);
      ++r.settle_steps;
    }
    if (rank == 0 && !opt.quiet)
      spdlog::info("warm-up: {} steps added for warmup_s", r.settle_steps);
  };

  GemmPlanCounts plans_before_timed;
  for (int64_t s = 0; s < total; ++s) {
    if (s == untimed) settle();
    const bool timed = s >= untimed;
    const bool first_timed = s == untimed;
    const bool check_now =
        timed && (w.check == CheckMode::kEvery || (w.check == CheckMode::kFirst && first_timed));
    const bool dump_now = first_timed && !opt.dump.empty();
    const bool last = s == total - 1;
    inject_fault(fault, rank, s);
    if (s == untimed) plans_before_timed = ops.gemm_plan_counts();
    if (first_timed && w.fp8_weights == Fp8Weights::kCached) {
      // What the timed steps leave out, timed alone (the warm-up gathered the weights).
      double q = layer.time_weight_quantization(5);
      allreduce_bounded(&q, 1, MPI_DOUBLE, MPI_MAX, world, "the weight quantization's time",
                        opt.timeout_s);
      r.fp8_weight_quantize_ms = q;
    }
    if (const auto m = gemm_choice.methods_for_step(s)) ops.set_expert_gemm_methods(*m);
    const bool time_gemms = gemm_choice.times_gemms(s);
    ops.time_expert_gemms(time_gemms);
    // graph: the last warm-up step is captured (the ones before it sized every buffer), the
    // timed steps replay it.
    if (w.graph && s == untimed - 1) layer.capture_next_step();
    start_step(gemm_choice.input_step(s));
    if (timed) timed_stretch(true);
    layer.run_step(ms);
    if (check_now || dump_now || last) timed_stretch(false);
    allreduce_max_min(ms.data(), kNumPhases, ms.data(), ms_least.data(), world,
                      "the all-reduce of a step's phase times", opt.timeout_s);
    // The shared experts run on the same GEMM methods (0 ms without them). A GEMM's time is the
    // slowest rank's, as a phase's is; a rank without one (NaN) gives infinity: never fastest.
    ExpertGemmMs gemm_ms = ops.expert_gemm_ms();
    if (time_gemms) {
      for (double& t : gemm_ms)
        if (!std::isfinite(t)) t = std::numeric_limits<double>::infinity();
      allreduce_bounded(gemm_ms.data(), kNumExpertGemms, MPI_DOUBLE, MPI_MAX, world,
                        "the all-reduce of a step's expert GEMM times", opt.timeout_s);
    }
    gemm_choice.record(s, ms[kExpertsFwd] + ms[kExpertsBwd] + ms[kSharedFwd] + ms[kSharedBwd],
                       gemm_ms);
    if (gemm_choice.active() && s + 1 == untimed) {
      r.gemm.method = gemm_choice.choice_name();
      r.gemm.methods = gemm_choice.choice();
      r.gemm.warmup_experts_ms = gemm_choice.tries_ms();
      r.gemm.warmup_gemm_ms = gemm_choice.gemm_tries_ms();
      r.gemm.warmup_per_gemm = gemm_choice.per_gemm_try();
      if (rank == 0) spdlog::info("expert GEMMs: {}", gemm_choice.summary());
    }
    if (timed) {
      for (int p = 0; p < kNumPhases; ++p) {
        samples[p].push_back(ms[p]);
        spread_samples[p].push_back(ms[p] - ms_least[p]);
      }
      const LaneTimes& lt = layer.lanes();
      // The slowest rank's figures, and the all-to-all time of the rank that spent least in them.
      double lanes[kNumLaneFigures] = {lt.busy_ms[kMainLane], lt.busy_ms[kSideLane], lt.comm_ms,
                                       lt.exposed_comm_ms};
      double least[kA2aLeastRank];
      allreduce_max_min(lanes, kA2aLeastRank, lanes, least, world,
                        "the all-reduce of a step's lane times", opt.timeout_s);
      lanes[kA2aLeastRank] = least[kA2a];
      for (int i = 0; i < kNumLaneFigures; ++i) lane_samples[i].push_back(lanes[i]);
      double host[2] = {layer.host_issue_ms(), double(layer.host_waits())};
      allreduce_bounded(host, 2, MPI_DOUBLE, MPI_MAX, world,
                        "the all-reduce of a step's host figures", opt.timeout_s);
      host_issue_samples.push_back(host[0]);
      host_waits += host[1];
      const StepTraffic tr = layer.traffic();
      for (int64_t e = 0; e < d.E; ++e) expert_rows[e] += layer.global_expert_counts()[e];
      tile_rows.add(layer.global_expert_counts().data(), d.E);
      double mine = double(tr.rows_received);
      std::vector<double> all(world_size);
      allgather_bounded(&mine, all.data(), 1, MPI_DOUBLE, world, "the all-gather of rows received",
                        opt.timeout_s);
      for (int i = 0; i < world_size; ++i) rank_rows[i] += all[i];
      double waste[2] = {double(tr.rows_dropped), double(tr.rows_padded)};
      allreduce_bounded(waste, 2, MPI_DOUBLE, MPI_SUM, world, "the all-reduce of dropped rows",
                        opt.timeout_s);
      rows_dropped += waste[0];
      rows_padded += waste[1];
      for (int dir = 0; dir < kNumDirs; ++dir) bytes_sent[dir] += tr.bytes_to_others[dir];
      rows_to_others += double(tr.rows_to_others);
    }
    if (check_now || dump_now) {
      // A dump writes every local expert; the check reads this FSDP rank's share an expert at a
      // time.
      OutputsWanted want;
      want.expert_weights = dump_now;
      want.expert_grads = dump_now;
      StepOutputs o = layer.download_outputs(want);
      o.loss = world_loss(o, world, opt.timeout_s);
      if (check_now) {
        // The reference recomputes the whole step, unlike the timed steps: say so before a long
        // silence.
        if (rank == 0)
          spdlog::info(
              "checking step {} against the {}: out, dx, p, dw_gate, dw_in, dw_out, aux, z, the "
              "loss and the routing{}",
              s, ref_on_gpu ? "fp32 GPU reference" : "float64 CPU reference",
              ref_on_gpu ? "" : "; on the host this may take a while for a large shape");
        const ExpertGradReader read = [&layer](int64_t e, std::vector<float>& dw_in,
                                               std::vector<float>& dw_out) {
          layer.download_expert_grads(layer.local_slot(e), dw_in, dw_out);
        };
        r.checks.push_back(check_step(w, mesh, world, s, o, layer.local_experts(), read, make_math,
                                      opt.timeout_s, rank == 0 && !opt.quiet));
        if (rank == 0 && !r.checks.back().pass)
          spdlog::warn("check FAILED at step {} (see the correctness table)", s);
      }
      if (dump_now) {
        write_dump(opt.dump, w, mesh, o);
        if (rank == 0) spdlog::info("dumped step {} to {}", s, opt.dump);
      }
    }
    if (last) {
      r.digests = world_digests(layer, world, opt.timeout_s);
      r.digest_function = kDigestFunction;
    }
    const auto now = std::chrono::steady_clock::now();
    if (rank == 0 && !opt.quiet && (now - last_progress > std::chrono::seconds(5) || last)) {
      last_progress = now;
      const double med = samples[kStep].empty() ? ms[kStep] : summarize(samples[kStep]).median;
      spdlog::info("step {}/{} ({}), median step {:.3f} ms", s + 1, total,
                   timed ? "timed" : "warm-up", med);
    }
  }

  // Without shared experts their phases are not reported (results before them have none).
  auto reported = [&](int p) {
    return w.model.shared_experts > 0 || (p != kSharedFwd && p != kSharedBwd);
  };
  for (int p = 0; p < kNumPhases; ++p)
    if (reported(p)) r.samples_ms[phase_name(p)] = evenly_spaced(samples[p], kMaxSamples);
  for (int p = 0; p < kNumPhases; ++p) {
    if (p == kStep || !reported(p)) continue;
    PhaseResult ph;
    ph.phase = p;
    ph.name = phase_name(p);
    ph.ms = summarize(samples[p]);
    ph.rank_spread = summarize(spread_samples[p]);
    ph.in_step = p < kNumStepPhases;
    if (p == kDispatchBwd && w.overlap == Overlap::kDispatchBwd) ph.beside = "experts_bwd";
    if (p == kSharedFwd && w.overlap == Overlap::kDispatchBwd) ph.beside = "dispatch_fwd";
    // The pipeline runs every chunk's dispatcher directions on the side lane beside the chunks'
    // expert GEMMs, and the shared experts on the main lane beside the first and last of them.
    if (w.overlap == Overlap::kPipeline) {
      if (p == kDispatchFwd || p == kCombineFwd) ph.beside = "experts_fwd";
      if (p == kCombineBwd || p == kDispatchBwd) ph.beside = "experts_bwd";
    }
    r.phases.push_back(ph);
  }
  for (int i = 0; i < kNumLaneFigures; ++i) r.lanes.figures[i] = summarize(lane_samples[i]);
  const double steps = double(w.steps);
  r.host.issue_ms = summarize(host_issue_samples);
  r.host.waits_per_step = host_waits / steps;
  r.host.step = layer.replaying() ? "graph" : w.graph ? "sync-free" : "issued";
  r.clocks = gather_clocks(clocks.get(), clocks_why_none, world, opt.timeout_s);
  r.routing.rows_routed_per_step = double(d.N * d.K);
  r.routing.rows_dropped_per_step = rows_dropped / steps;
  r.routing.rows_padded_per_step = rows_padded / steps;
  r.routing.capacity_rows = expert_capacity(w);
  r.routing.tile_rows_over_rows = tile_rows.over_rows();
  const double rows_kept = r.routing.rows_routed_per_step - r.routing.rows_dropped_per_step;
  for (double& b : bytes_sent) b /= steps;
  allreduce_bounded(bytes_sent, kNumDirs, MPI_DOUBLE, MPI_MAX, world, "the bytes-sent maximum",
                    opt.timeout_s);
  allreduce_bounded(&rows_to_others, 1, MPI_DOUBLE, MPI_SUM, world, "the rows-sent sum",
                    opt.timeout_s);
  r.routing.rows_per_token_to_others = rows_to_others / steps / double(d.N);
  describe_phases(w, mesh, device.storage_bytes(), device.bytes_of(d.grad_dtype), rows_kept,
                  bytes_sent, r.phases);
  r.step_ms = summarize(samples[kStep]);
  r.step_drift = drift_by_thirds(samples[kStep]);
  r.step_floor_ms = apply_floors(r.calibration, mesh.world, r.phases);
  r.tokens_per_step = double(d.N);
  r.model_flops_per_step = model_flops_per_step(w.model, double(d.N), rows_kept);

  std::vector<double> er, rr;
  for (double v : expert_rows) er.push_back(v / double(w.steps));
  for (double v : rank_rows) rr.push_back(v / double(w.steps));
  r.routing.rows_per_expert = summarize(er);
  r.routing.rows_received_per_rank = summarize(rr);
  r.routing.load_max_over_mean =
      r.routing.rows_per_expert.mean > 0
          ? r.routing.rows_per_expert.max / r.routing.rows_per_expert.mean
          : 0;
  for (double v : er) r.routing.experts_without_tokens += v == 0.0;
  r.routing.rank_load_max_over_mean =
      r.routing.rows_received_per_rank.mean > 0
          ? r.routing.rows_received_per_rank.max / r.routing.rows_received_per_rank.mean
          : 0;
  r.routing.first_step_rank_load_contiguous = layer.placement().contiguous_load;
  r.routing.first_step_rank_load_placed = layer.placement().placed_load;

  // GEMM planning in the timed steps is host work inside the step's time: reported, not hidden.
  const GemmPlanCounts plans_end = ops.gemm_plan_counts();
  int64_t plan_counts[6] = {plans_before_timed.plans,
                            plans_before_timed.heuristic_queries,
                            plans_before_timed.tunings,
                            plans_end.plans - plans_before_timed.plans,
                            plans_end.heuristic_queries - plans_before_timed.heuristic_queries,
                            plans_end.tunings - plans_before_timed.tunings};
  allreduce_bounded(plan_counts, 6, MPI_INT64_T, MPI_MAX, world, "the GEMM plan counts",
                    opt.timeout_s);
  r.gemm.before_timed = {plan_counts[0], plan_counts[1], plan_counts[2]};
  r.gemm.timed = {plan_counts[3], plan_counts[4], plan_counts[5]};

  int64_t hw = device.memory_high_water();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  int64_t rss = int64_t(ru.ru_maxrss) * 1024;
  allreduce_bounded(&hw, 1, MPI_INT64_T, MPI_MAX, world, "the memory maximum", opt.timeout_s);
  allreduce_bounded(&rss, 1, MPI_INT64_T, MPI_MAX, world, "the memory maximum", opt.timeout_s);
  r.memory_high_water_bytes = hw;
  r.host_peak_rss_bytes = rss;

  if (rank == 0) {
    // --out - is for a pipe into jq and the like: stdout then holds the JSON alone, and the
    // report goes to stderr beside the logs, where the person who started the run still sees it.
    const bool json_on_stdout = opt.out == "-";
    print_summary(r, json_on_stdout ? stderr : stdout);
    if (json_on_stdout) {
      std::fputs((result_to_json(r).dump(2) + "\n").c_str(), stdout);
      std::fflush(stdout);
    } else if (!opt.out.empty()) {
      write_json_atomically(opt.out, result_to_json(r));
      spdlog::info("wrote {}", opt.out);
    }
  }
  return r.pass() ? 0 : 1;
}

}  // namespace moe
