#include "core/workload.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "core/buffer_plan.h"
#include "core/dispatcher.h"
#include "core/error.h"
#include "core/fp8_buffers.h"
#include "core/mesh.h"
#include "core/router_scratch.h"
#include "core/saturating.h"

namespace moe {

namespace {

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

int64_t prod(std::initializer_list<int64_t> xs) { return saturating_product(xs); }
int64_t sum(std::initializer_list<int64_t> xs) { return saturating_sum(xs); }

// "1, 2, 4, 8" for 8; pairs up to sqrt(n), so that an absurd n cannot hang an error message.
std::string divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  std::vector<std::string> out;
  for (int64_t d : low) out.push_back(std::to_string(d));
  return join(out, ", ");
}

}  // namespace

void resolve_and_validate(Workload& w, int world_size) {
  MOE_CHECK(world_size >= 1, "world size " << world_size);
  const int64_t world = world_size;
  const ModelShape& m = w.model;
  const RouterConfig& r = w.router;

  // Sizes first: the mesh and router checks below divide by them.
  auto positive = [](const char* key, int64_t v) {
    MOE_USER_CHECK(v > 0, key << " = " << v << " must be a positive integer; set it in the "
                              << "workload file or with --set " << key << "=N");
  };
  positive("model.hidden", m.hidden);
  positive("model.ffn", m.ffn);
  positive("model.experts", m.experts);
  positive("model.topk", m.topk);
  positive("tokens_per_rank", w.tokens_per_rank);
  MOE_USER_CHECK(w.steps >= 1 && w.steps <= kMaxSteps,
                 "steps = " << w.steps << " must be between 1 and " << kMaxSteps
                            << " (the timed steps); set e.g. --set steps=20");
  MOE_USER_CHECK(w.warmup >= 0 && w.warmup <= kMaxSteps,
                 "warmup = " << w.warmup << " must be between 0 and " << kMaxSteps
                             << " (untimed steps before timing); set e.g. --set warmup=3");
  MOE_USER_CHECK(std::isfinite(w.warmup_s) && w.warmup_s >= 0 && w.warmup_s <= 3600,
                 "warmup_s = " << w.warmup_s
                               << " must be between 0 and 3600 (seconds the untimed steps last "
                                  "at least; 0 = just the warm-up steps); set e.g. --set "
                                  "warmup_s=5");
  MOE_USER_CHECK(w.expert_grad_dtype == DType::kFp32 || w.dtype == DType::kBf16,
                 "expert_grad_dtype = \"bf16\" with dtype = \"fp32\": gradients narrower than "
                 "the weights they train; set expert_grad_dtype to \"fp32\" or dtype to \"bf16\"");
  MOE_USER_CHECK(w.precision == Precision::kBf16 || w.dtype == DType::kBf16,
                 "precision = \"" << name_of(w.precision)
                                  << "\" with dtype = \"fp32\": FP8 quantizes the bf16 values "
                                     "the step stores (MATH.md); set dtype to \"bf16\" or "
                                     "precision to \"bf16\"");
  MOE_USER_CHECK(w.dispatch_dtype == DispatchDtype::kBf16 || w.precision == Precision::kFp8Block,
                 "dispatch_dtype = \"fp8\" with precision = \""
                     << name_of(w.precision)
                     << "\": FP8 rows on the wire carry DeepSeek-V3's 1 x 128 scales, which only "
                        "the fp8_block recipe multiplies as they are (MATH.md); set precision to "
                        "\"fp8_block\" or dispatch_dtype to \"bf16\"");
  MOE_USER_CHECK(w.fp8_weights == Fp8Weights::kPerStep || w.precision != Precision::kBf16,
                 "fp8_weights = \"cached\" with precision = \"bf16\": only an FP8 step "
                 "quantizes its weights; set precision to \"fp8_tensor\" or \"fp8_block\", "
                 "or fp8_weights to \"per_step\"");
  MOE_USER_CHECK(w.fp8_weights == Fp8Weights::kPerStep || w.warmup >= 1,
                 "fp8_weights = \"cached\" with warmup = 0: the weights are quantized in the "
                 "first step, which must be a warm-up step to stay out of the timings; set "
                 "warmup to 1 or more, or fp8_weights to \"per_step\"");
  MOE_USER_CHECK(w.dispatch_dtype == DispatchDtype::kBf16 || m.hidden % 16 == 0,
                 "dispatch_dtype = \"fp8\" with model.hidden = "
                     << m.hidden
                     << ": FP8 rows of H codes must start 16-byte aligned on the wire and in the "
                        "GEMM; set model.hidden to a multiple of 16 or dispatch_dtype to \"bf16\"");
  MOE_USER_CHECK(m.shared_experts >= 0 && m.shared_experts <= kMaxSharedExperts,
                 "model.shared_experts = " << m.shared_experts << " must be between 0 (none) and "
                                           << kMaxSharedExperts
                                           << " (DeepSeek-V3 has 1, DeepSeek-MoE 16B 2)");
  MOE_USER_CHECK(m.shared_ffn >= 0, "model.shared_ffn = " << m.shared_ffn
                                                          << " must be a positive integer (or 0 "
                                                             "without shared experts)");
  MOE_USER_CHECK(m.shared_experts == 0 || m.shared_ffn > 0,
                 "model.shared_experts = " << m.shared_experts
                                           << " needs each shared expert's FFN width: set "
                                              "model.shared_ffn (DeepSeek-V3: 2048), e.g. --set "
                                              "model.shared_ffn=2048");
  MOE_USER_CHECK(m.topk <= m.experts,
                 "model.topk = " << m.topk << " exceeds model.experts = " << m.experts
                                 << " (a token cannot pick more experts than exist); "
                                 << "set model.topk <= " << m.experts);

  // Mesh: 0 means "auto". With both auto, EP goes as wide as the experts and the world allow
  // (ep = gcd), and the rest of the world becomes FSDP.
  int64_t ep = w.mesh.ep, fsdp = w.mesh.fsdp;
  MOE_USER_CHECK(ep >= 0, "mesh.ep = " << ep << " must be a positive integer or \"auto\"");
  MOE_USER_CHECK(fsdp >= 0, "mesh.fsdp = " << fsdp << " must be a positive integer or \"auto\"");
  const int64_t E = m.experts;
  const std::string world_from = " (the number of ranks, from mpirun -np)";
  const std::string valid_ep = "valid mesh.ep values for " + std::to_string(E) + " experts on " +
                               std::to_string(world) + " ranks: " + divisors(std::gcd(E, world));
  if (ep == 0 && fsdp == 0) {
    ep = std::gcd(E, world);
    fsdp = world / ep;
  } else if (ep == 0) {
    MOE_USER_CHECK(world % fsdp == 0, "mesh.fsdp = " << fsdp << " does not divide the world size "
                                                     << world << world_from << "; set mesh.fsdp "
                                                     << "to one of " << divisors(world)
                                                     << " or \"auto\"");
    ep = world / fsdp;
    MOE_USER_CHECK(E % ep == 0, "mesh.ep = " << ep << " (derived: world size " << world
                                             << " / mesh.fsdp " << fsdp << ") does not divide "
                                             << "model.experts = " << E << "; " << valid_ep);
  } else if (fsdp == 0) {
    MOE_USER_CHECK(world % ep == 0, "mesh.ep = " << ep << " does not divide the world size "
                                                 << world << world_from << ", so mesh.fsdp "
                                                 << "cannot be derived; " << valid_ep);
    fsdp = world / ep;
  }
  MOE_USER_CHECK(E % ep == 0, "model.experts = " << E << " is not divisible by mesh.ep = " << ep
                                                 << " (each EP rank holds experts / ep); "
                                                 << valid_ep);
  MOE_USER_CHECK(prod({ep, fsdp}) == world,
                 "mesh.ep (" << ep << ") x mesh.fsdp (" << fsdp << ") = " << prod({ep, fsdp})
                             << " but the world size is " << world << world_from
                             << "; make ep x fsdp = " << world
                             << " or set one of them to \"auto\"");

  // Router (MATH.md steps 2-6).
  MOE_USER_CHECK(!r.softmax_after_topk || r.score == RouterScore::kSoftmax,
                 "router.softmax_after_topk = true needs router.score = \"softmax\" (got \""
                     << name_of(r.score)
                     << "\"); the top-k softmax replaces softmax scores only: set "
                     << "router.softmax_after_topk=false or router.score=softmax");
  MOE_USER_CHECK(std::isfinite(r.scaling) && r.scaling > 0,
                 "router.scaling = " << r.scaling << " must be a finite number > 0 (1 = no "
                                     << "scaling)");
  MOE_USER_CHECK(std::isfinite(r.aux_coeff) && r.aux_coeff >= 0,
                 "router.aux_coeff = " << r.aux_coeff << " must be a finite number >= 0 (0 = no "
                                       << "load-balancing loss)");
  MOE_USER_CHECK(std::isfinite(r.z_coeff) && r.z_coeff >= 0,
                 "router.z_coeff = " << r.z_coeff << " must be a finite number >= 0 (0 = no "
                                     << "z-loss)");
  MOE_USER_CHECK(r.groups >= 1, "router.groups = " << r.groups << " must be >= 1 (1 = no "
                                                   << "group-limited routing)");
  MOE_USER_CHECK(E % r.groups == 0, "router.groups = " << r.groups << " does not divide "
                                                       << "model.experts = " << E << " (groups "
                                                       << "are equal and contiguous); valid "
                                                       << "router.groups: " << divisors(E));
  MOE_USER_CHECK(r.group_topk >= 1 && r.group_topk <= r.groups,
                 "router.group_topk = " << r.group_topk
                                        << " must be between 1 and router.groups = " << r.groups);
  if (r.groups > 1) {
    MOE_USER_CHECK(m.topk % r.group_topk == 0,
                   "model.topk = " << m.topk << " is not divisible by router.group_topk = "
                                   << r.group_topk << " (a group's score sums its top "
                                   << "topk / group_topk experts); pick a router.group_topk that "
                                   << "divides " << m.topk);
    const int64_t selectable = r.group_topk * (E / r.groups);
    MOE_USER_CHECK(m.topk <= selectable,
                   "model.topk = " << m.topk << " exceeds the " << selectable << " experts in the "
                                   << "router.group_topk = " << r.group_topk << " kept groups of "
                                   << E / r.groups << " experts; raise router.group_topk or "
                                   << "lower router.groups or model.topk");
  }
  MOE_USER_CHECK(w.gemm.sm90_cluster == 1 || w.gemm.sm90_cluster == 2,
                 "gemm.sm90_cluster = " << w.gemm.sm90_cluster
                                        << " must be 1 or 2 (CTAs per cluster of the grouped "
                                           "sm90 kernel)");
  MOE_USER_CHECK(w.gemm.sm90_ctas >= 0 && w.gemm.sm90_ctas <= 1024,
                 "gemm.sm90_ctas = " << w.gemm.sm90_ctas
                                     << " must be between 0 and 1024 (persistent CTAs of the "
                                        "grouped sm90 kernel; 0 = one per SM)");
  MOE_USER_CHECK(w.gemm.sm90_schedule == Sm90Schedule::kCooperative || w.gemm.sm90_cluster == 1,
                 "gemm.sm90_schedule = pingpong runs single CTAs, and gemm.sm90_cluster = "
                     << w.gemm.sm90_cluster << "; set gemm.sm90_cluster = 1 or "
                     << "gemm.sm90_schedule = cooperative");
  for (int g = 0; g < kNumExpertGemms; ++g)
    MOE_USER_CHECK(
        w.gemm.methods[size_t(g)] == GemmMethod::kAuto || w.gemm.method != GemmMethod::kAuto,
        "gemm.method_" << kExpertGemmNames[size_t(g)] << " = " << name_of(w.gemm.methods[size_t(g)])
                       << " sets one expert GEMM's method, and gemm.method (the "
                          "others') is auto: set gemm.method to lt_multistream, "
                          "grouped_batched or grouped_sm90 (to rerun a per_gemm "
                          "choice: the result's gemm.warmup_per_gemm.against), or "
                          "gemm.method_"
                       << kExpertGemmNames[size_t(g)] << " to auto");
  MOE_USER_CHECK(w.gemm.streams >= 1 && w.gemm.streams <= 32,
                 "gemm.streams = " << w.gemm.streams << " must be between 1 and 32 (side streams "
                                   << "of the per-expert GEMM loop; 4 is the default)");

  const RoutingConfig& rt = w.routing;
  MOE_USER_CHECK(std::isfinite(rt.skew) && rt.skew >= 0,
                 "routing.skew = " << rt.skew << " must be a finite number >= 0 (0 = uniform; "
                                   << "1 to 2 is a typical power-law skew)");
  MOE_USER_CHECK(rt.hot_fraction >= 0 && rt.hot_fraction <= 1,
                 "routing.hot_fraction = " << rt.hot_fraction
                                           << " must be between 0 and 1 (the share of tokens "
                                              "sent to the hot experts)");
  MOE_USER_CHECK(rt.hot_experts >= 1 && rt.hot_experts <= m.experts,
                 "routing.hot_experts = " << rt.hot_experts << " must be between 1 and "
                                          << "model.experts = " << m.experts);
  MOE_USER_CHECK(w.capacity_factor == 0 || (std::isfinite(w.capacity_factor) &&
                                            w.capacity_factor > 0 && w.capacity_factor <= 1e6),
                 "capacity_factor = " << w.capacity_factor
                                      << " must be a number in (0, 1e6] (1 = each expert takes "
                                         "its balanced share of rows) or null for dropless "
                                         "routing");
  MOE_USER_CHECK(w.align >= 1 && w.align <= 4096,
                 "align = " << w.align << " must be between 1 and 4096 (1 = no padding; 16 or "
                            << "128 pad each expert's rows for the tensor-core GEMM tiles)");

  // The pipeline's chunks: equal, so that every chunk's dispatcher has the same sizes and the
  // capacity the same meaning in each.
  const int64_t C = w.overlap_chunks;
  if (w.overlap != Overlap::kPipeline) {
    MOE_USER_CHECK(C == Workload().overlap_chunks,
                   "overlap_chunks = " << C << " is read only with overlap = \"pipeline\" (got \""
                                       << name_of(w.overlap)
                                       << "\"): set overlap=pipeline, or leave overlap_chunks at "
                                          "its default "
                                       << Workload().overlap_chunks);
  } else {
    MOE_USER_CHECK(C >= 1 && C <= kMaxOverlapChunks,
                   "overlap_chunks = " << C << " must be between 1 and " << kMaxOverlapChunks
                                       << " (chunks of tokens_per_rank that overlap = pipeline "
                                          "runs; 1 = no chunking)");
    std::vector<std::string> fit;
    for (int64_t c = 1; c <= std::min(kMaxOverlapChunks, w.tokens_per_rank); ++c)
      if (w.tokens_per_rank % c == 0) fit.push_back(std::to_string(c));
    MOE_USER_CHECK(w.tokens_per_rank % C == 0,
                   "overlap_chunks = " << C
                                       << " does not divide tokens_per_rank = " << w.tokens_per_rank
                                       << " (the pipeline's chunks are equal); set overlap_chunks "
                                          "to one of "
                                       << join(fit, ", ") << ", or change tokens_per_rank");
  }

  // The nvlink dispatcher's windows span one host's GPUs (comm/peer_window.h).
  MOE_USER_CHECK(w.dispatch != DispatchKind::kNvlink || ep <= kMaxWindowRanks,
                 "dispatch = \"nvlink\" spans at most " << kMaxWindowRanks
                                                        << " EP ranks (one host's GPUs), and "
                                                           "mesh.ep is "
                                                        << ep
                                                        << ": lower mesh.ep or set another "
                                                           "dispatch");

  // A sync-free step needs every size without the counts: NCCL's ragged all-to-all and the host
  // plans of alltoall_dedup take them from the host. At ep 1 every dispatch is alltoall's local
  // path, which keeps its counts on the device.
  if (w.graph) {
    const bool host_sized =
        w.dispatch == DispatchKind::kAlltoall || w.dispatch == DispatchKind::kAlltoallDedup;
    MOE_USER_CHECK(ep == 1 || !host_sized,
                   "graph = true needs a step with no host sync, and at mesh.ep = "
                       << ep << " dispatch = \"" << name_of(w.dispatch)
                       << "\" takes its all-to-all's sizes from counts on the host: set "
                          "dispatch=nvlink or allgather (fixed sizes), or mesh.ep=1, or "
                          "graph=false");
    MOE_USER_CHECK(w.warmup >= 2,
                   "graph = true captures the step in the last warm-up step, "
                   "after at least one run as issued (which sizes every buffer): "
                   "set warmup to 2 or more (got "
                       << w.warmup << ")");
  }

  // One rank may receive every row of its EP group: T * K * ep rows, indexed with int32.
  const int64_t rows = prod({w.tokens_per_rank, m.topk, ep});
  MOE_USER_CHECK(rows <= INT32_MAX,
                 "tokens_per_rank (" << w.tokens_per_rank << ") x model.topk (" << m.topk
                                     << ") x mesh.ep (" << ep << ") = " << rows << " rows that one "
                                     << "rank may receive, more than int32 row indices hold "
                                     << "(2^31 - 1); lower tokens_per_rank");
  // The reference gathers each rank's [T, H] tokens as one MPI message, counted in an int.
  const int64_t elements = prod({w.tokens_per_rank, m.hidden});
  MOE_USER_CHECK(elements <= INT32_MAX,
                 "tokens_per_rank (" << w.tokens_per_rank << ") x model.hidden (" << m.hidden
                                     << ") = " << elements << " elements in one rank's tokens, "
                                     << "more than one MPI message holds (2^31 - 1); lower "
                                     << "tokens_per_rank");
  // Only a workload that passed every check gets its mesh resolved.
  w.mesh.ep = ep;
  w.mesh.fsdp = fsdp;
}

// The step's buffers as MoeLayer allocates them (core/buffer_plan.h: the fixed ones, and the
// ragged ones grown for balanced routing), the dispatcher's, and the reference's host memory when
// check != off (it holds every expert and the world's tokens, so it dominates small workloads).
int64_t estimate_rank_bytes(const Workload& w_in, int world_size, int storage_bytes,
                            int grad_bytes) {
  int64_t bytes = estimate_step_memory(w_in, world_size, storage_bytes, grad_bytes).total();
  if (w_in.check != CheckMode::kOff)
    bytes = sum({bytes, estimate_reference_bytes(w_in, world_size, false).host});
  return bytes;
}

std::vector<StepMemory::Part> StepMemory::parts() const {
  return {{"weights", "weights", weights},
          {"gradients", "their gradients", gradients},
          {"expert_rows", "expert rows", expert_rows},
          {"tokens", "token buffers", tokens},
          {"shared_experts", "shared experts", shared_experts},
          {"dispatcher", "dispatcher", dispatcher},
          {"fp8", "FP8 weight codes and GEMM scratch", fp8},
          {"kernel_scratch", "router and layout kernels' scratch", kernel_scratch}};
}

int64_t StepMemory::total() const {
  int64_t bytes = 0;
  for (const Part& p : parts()) bytes = sum({bytes, p.bytes});
  return bytes;
}

StepMemory estimate_step_memory(const Workload& w_in, int world_size, int storage_bytes,
                                int grad_bytes, bool cuda) {
  MOE_CHECK(storage_bytes > 0 && grad_bytes > 0,
            "storage_bytes " << storage_bytes << ", grad_bytes " << grad_bytes);
  Workload w = w_in;
  if (w.mesh.ep == 0 || w.mesh.fsdp == 0) resolve_and_validate(w, world_size);
  const BufferPlan plan = plan_step_buffers(w, storage_bytes, grad_bytes);
  StepMemory m;
  m.weights = plan.weight_bytes();
  m.gradients = plan.gradient_bytes();
  m.expert_rows = plan.ragged_bytes(plan.planned_rows);
  m.tokens = plan.token_bytes();
  m.shared_experts = plan.shared.bytes();
  m.dispatcher = step_dispatch_buffer_bytes(w, storage_bytes);
  if (cuda) {
    m.fp8 = cuda_fp8_step_bytes(w, plan.planned_rows);  // for the planned rows
    m.kernel_scratch = cuda_kernel_scratch_bytes(w);
  }
  return m;
}

ReferenceBytes estimate_reference_bytes(const Workload& w_in, int world_size, bool on_gpu) {
  Workload w = w_in;
  if (w.mesh.ep == 0 || w.mesh.fsdp == 0) resolve_and_validate(w, world_size);
  const int64_t H = w.model.hidden, F = w.model.ffn, E = w.model.experts, K = w.model.topk;
  const int64_t T = w.tokens_per_rank, W = world_size;
  // The shared experts' weights (S x F_sh wide in all), their gradients on every rank.
  const int64_t S = w.model.shared_experts, Fs = w.model.shared_ffn_used();
  const int64_t shared = prod({S, 3, H, Fs});
  ReferenceBytes b;
  auto add = [](int64_t& to, std::initializer_list<int64_t> factors) {
    to = sum({to, prod(factors)});
  };
  if (!on_gpu) add(b.host, {E, 3, H, F, 8});  // every expert's weights, float64
  if (!on_gpu) add(b.host, {shared, 8});      // the shared experts' weights
  add(b.host, {2, W, T, H, 8});               // the world's x and dout
  add(b.host, {W, T, K, 16});                 // the world's routing: idx, p, the backend's idx
  add(b.host, {W, T, E, 8});                  // the world's logits
  add(b.host, {2, T, H, 8});                  // out, dx
  // More than one rank: the routed experts split by expert, their results of every token
  // (compute_reference), out, dx and dp.
  if (W > 1) add(b.host, {W, T, sum({prod({2, H}), K}), 8});
  add(b.host, {3, H, F, 12});  // one expert's dw_in, dw_out, float and float64
  add(b.host, {shared, 8});    // dw_sh_in, dw_sh_out
  add(b.host, {H, E, 8});      // dw_gate
  // The backend's results copied to the host as floats for the comparison (MoeLayer::
  // download_outputs with the check's OutputsWanted: no expert weights, and the gradients one
  // expert at a time, download_expert_grads).
  add(b.host, {3, H, F, 4});  // one expert's dw_in, dw_out
  add(b.host, {shared, 4});   // dw_sh_in, dw_sh_out
  add(b.host, {4, T, H, 4});  // x, dout, out, dx
  add(b.host, {2, H, E, 4});  // w_gate, dw_gate
  add(b.host, {T, K, 9});     // idx, p, dropped
  if (w.precision != Precision::kBf16) {
    // FP8 (core/reference.cpp expert_operand_fp8): one expert's quantized weights and one
    // operand's rows at a time, at most an EP group's tokens (or the rank's, shared experts),
    // with their intermediates in float and float64; and the unquantized reference's results.
    const int64_t Fmax = std::max(F, Fs);
    const int64_t rows = std::max(prod({w.mesh.ep, T}) / step_chunks(w), T);
    add(b.host, {3, H, Fmax, 8});
    add(b.host, {rows, sum({prod({6, H}), prod({12, Fmax})}), 8});
    add(b.host, {sum({prod({2, T, H}), shared, prod({H, E})}), 8});
    if (on_gpu) {
      // The GPU reference makes one expert's weights on the host (float64, through floats)
      // and multiplies one product at a time on the device (kernels/cuda/reference.cu fp8()).
      add(b.host, {3, H, Fmax, 12});
      add(b.device, {sum({prod({4, H, Fmax}), prod({2, rows, std::max(H, 2 * Fmax)})}), 4});
    }
  }
  if (on_gpu) {
    add(b.device, {2, W, T, H, 4});        // the world's x and dout, fp32
    add(b.device, {W, T, E, 4});           // logits
    add(b.device, {H, E, 8});              // w_gate and its gradient
    const int64_t Fmax = std::max(F, Fs);  // the routed experts or a shared one
    add(b.device, {4, 3, H, Fmax});        // one expert's weights, fp32
    add(b.device, {4, 3, H, Fmax});        // and their gradients
    add(b.device, {2, W, T, H, 4});        // out, dx of every token (the split by expert)
    // A chunk of one expert's rows: at most 2 GiB of activations (kernels/cuda/reference.cu).
    add(b.device, {int64_t(2) << 30});
  }
  return b;
}

int64_t step_chunks(const Workload& w) {
  // Guarded for a workload not yet validated (--dry-run describes some before refusing them).
  return w.overlap == Overlap::kPipeline && w.overlap_chunks > 0 ? w.overlap_chunks : 1;
}

Workload chunk_workload(const Workload& w) {
  Workload chunk = w;
  chunk.tokens_per_rank = w.tokens_per_rank / step_chunks(w);
  chunk.overlap_chunks = 1;
  return chunk;
}

int64_t estimate_rank_bytes(const Workload& w, int world_size) {
  return estimate_rank_bytes(w, world_size, 4, 4);  // the CPU backend keeps floats
}

}  // namespace moe
