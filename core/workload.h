#pragma once
// The workload: one plain struct per JSON object, loaded from configs/*.json, overridden by
// --set key.path=value, then validated. Every key but model.* has a default
// (docs/configuration.md). Only the JSON declarations are included: kernel files compile this
// header with nvcc.
#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/grouped_gemm.h"

namespace moe {

// Every choice-valued key is a typed enum, parsed once (core/workload_keys.cpp holds each enum's
// names, in declaration order, beside the key that takes it); name_of gives the JSON spelling.
enum class DType { kBf16, kFp32 };
// How the six expert GEMMs (routed and shared) multiply (MATH.md "FP8 expert GEMMs"): the stored
// values, or each operand quantized to FP8 E4M3 first, per tensor or in DeepSeek-V3's blocks.
enum class Precision { kBf16, kFp8Tensor, kFp8Block };
// What the dispatched rows (x on its way to the experts) cross the wire as: the stored values, or
// e4m3 codes with their 1 x 128 scales, which the up projection multiplies as they are (MATH.md,
// `dispatch_dtype: fp8`; fp8_block only).
enum class DispatchDtype { kBf16, kFp8 };
// When an FP8 step quantizes its expert weights: in every step, or once (the first step's codes
// reused, as over the microbatches of one optimizer step).
enum class Fp8Weights { kPerStep, kCached };
enum class RouterScore { kSoftmax, kSigmoid };
enum class RoutingMode { kLearned, kUniform, kBalanced, kPowerlaw, kHot };
enum class DropPolicy { kProbability, kPosition };
enum class DispatchKind { kAlltoall, kAllgather, kAlltoallDedup, kNvlink };
// Which EP rank holds which expert (core/placement.h): blocks of consecutive experts, or dealt out
// by the first step's loads so that every rank receives about the same rows.
enum class ExpertPlacement { kContiguous, kBalanced };
enum class CheckMode { kFirst, kEvery, kOff };
enum class ReferenceDevice { kAuto, kCpu, kGpu };
// Which phases of the step run beside others. kDispatchBwd: dispatch_bwd (dx back to its tokens'
// ranks, and the unpermute) runs on the backend's side lane beside experts_bwd's weight gradients,
// which it does not touch (and beside shared_bwd); with shared experts, it runs shared_fwd on the
// side lane beside dispatch_fwd. Both are schedules, never a change of any result. kPipeline: the
// rank's tokens in overlap_chunks chunks, each dispatched, run through the experts and combined on
// its own, the dispatcher's directions of one chunk on the side lane beside the expert GEMMs of
// another (core/moe_layer.h); the expert weight gradients sum over the chunks, so their last bits
// differ from kNone's, and a capacity applies per chunk.
enum class Overlap { kNone, kDispatchBwd, kPipeline };
// The CUDA backend's expert GEMMs: kAuto chooses per workload in warm-up (app/gemm_choice.h);
// kLtMultistream is a cuBLASLt call per expert over gemm.streams side streams; kGroupedBatched one
// cublasGemmGroupedBatchedEx call.
enum class GemmMethod { kAuto, kLtMultistream, kGroupedBatched, kGroupedSm90 };
// How cuBLASLt algorithms are chosen for new GEMM shapes: kAuto by GEMM size, kBucket one query per
// bucket of row counts, kExact one per shape (kernels/cuda/gemm_cublaslt.h).
enum class GemmAlgo { kAuto, kBucket, kExact, kTuned };
// kTuned: how many of cuBLASLt's first answers for a bucket's shape it times.
constexpr int kGemmTuneCandidates = 8;
// How the grouped sm90 kernel's two MMA warpgroups share work: one tile together, or a tile each
// taking turns (kernels/cuda/grouped_gemm.h, GroupedSchedule).
enum class Sm90Schedule { kCooperative, kPingpong };

const char* name_of(DType value);
const char* name_of(Precision value);
const char* name_of(DispatchDtype value);
const char* name_of(Fp8Weights value);
const char* name_of(RouterScore value);
const char* name_of(RoutingMode value);
const char* name_of(DropPolicy value);
const char* name_of(DispatchKind value);
const char* name_of(ExpertPlacement value);
// Every value of the `dispatch` key, in declaration order.
const std::vector<std::string>& dispatcher_names();
const char* name_of(CheckMode value);
const char* name_of(ReferenceDevice value);
const char* name_of(Overlap value);
const char* name_of(GemmMethod value);
const char* name_of(GemmAlgo value);
const char* name_of(Sm90Schedule value);
inline const char* dtype_name(DType d) { return name_of(d); }

struct ModelShape {
  int64_t hidden = 0;   // H
  int64_t ffn = 0;      // F (per expert; w_in is [H, 2F])
  int64_t experts = 0;  // E
  int64_t topk = 0;     // K
  // Shared experts (MATH.md "Shared experts"): S dense SwiGLU FFNs of width F_sh that every token
  // passes through with weight 1. shared_ffn is read only when shared_experts > 0.
  int64_t shared_experts = 0;  // S
  int64_t shared_ffn = 0;      // F_sh
  // F_sh where there are shared experts, else 0: a width left set without them (an ablation,
  // which validation lets through) sizes nothing.
  int64_t shared_ffn_used() const { return shared_experts > 0 ? shared_ffn : 0; }
};

struct RouterConfig {
  RouterScore score = RouterScore::kSoftmax;
  bool softmax_after_topk = false;  // Mixtral style; only with softmax
  bool normalize_topk = false;
  double scaling = 1.0;
  int64_t groups = 1;      // G; 1 = no group-limited routing
  int64_t group_topk = 1;  // Gk, groups kept per token
  bool expert_bias = false;
  double aux_coeff = 0.0;
  double z_coeff = 0.0;
};

// Where tokens go. kLearned routes by the gate (MATH.md); the other modes force the expert set of
// every token from the seed (core/routing_modes.h) while the gate still weighs and is trained.
struct RoutingConfig {
  RoutingMode mode = RoutingMode::kLearned;
  double skew = 1.2;          // powerlaw: expert weight ~ 1 / popularity_rank^skew
  double hot_fraction = 0.5;  // hot: share of tokens that go to the hot experts
  int64_t hot_experts = 1;    // hot: how many experts are hot
};

struct MeshConfig {
  int64_t ep = 0;    // 0 = "auto"
  int64_t fsdp = 0;  // 0 = "auto"
};

// The CUDA backend's expert GEMM knobs (the CPU backend has one way and refuses others).
struct GemmConfig {
  GemmMethod method = GemmMethod::kAuto;
  int64_t streams = 4;  // side streams of the per-expert loop
  GemmAlgo algo = GemmAlgo::kAuto;
  int64_t sm90_cluster = 1;       // CTAs per cluster of the grouped sm90 kernel
  bool sm90_fuse_swiglu = false;  // SwiGLU and its backward in the grouped kernel's epilogues
  Sm90Schedule sm90_schedule = Sm90Schedule::kCooperative;
  // At most this many persistent CTAs of the grouped sm90 kernel (0: one per SM), leaving the
  // other SMs to kernels running beside it (the pipeline's collectives).
  int64_t sm90_ctas = 0;
  // Per expert GEMM (ExpertGemm order): a method for that GEMM instead of `method`'s, which must
  // then be fixed; kAuto: `method`'s. What reruns a per_gemm choice of `method` auto.
  std::array<GemmMethod, kNumExpertGemms> methods = {GemmMethod::kAuto, GemmMethod::kAuto,
                                                     GemmMethod::kAuto, GemmMethod::kAuto,
                                                     GemmMethod::kAuto, GemmMethod::kAuto};
};

// Each field's key, type, default and meaning are in one table (core/workload_keys.cpp), from
// which parsing, --set, to_json and docs/configuration.md all come.
struct Workload {
  std::string name = "unnamed";
  ModelShape model;
  RouterConfig router;
  RoutingConfig routing;
  int64_t tokens_per_rank = 0;  // T; 0 means "not given", an error
  MeshConfig mesh;
  DType dtype = DType::kBf16;
  DType expert_grad_dtype = DType::kFp32;
  Precision precision = Precision::kBf16;
  DispatchDtype dispatch_dtype = DispatchDtype::kBf16;
  Fp8Weights fp8_weights = Fp8Weights::kPerStep;
  DispatchKind dispatch = DispatchKind::kAlltoall;
  ExpertPlacement expert_placement = ExpertPlacement::kContiguous;
  double capacity_factor = 0.0;  // 0 (JSON null) = dropless
  DropPolicy drop_policy = DropPolicy::kProbability;
  int64_t align = 1;  // each local expert's rows padded to a multiple of this for the GEMMs
  Overlap overlap = Overlap::kNone;
  // Chunks of tokens_per_rank with overlap = pipeline (read only there): 2, the fewest that
  // overlap anything, so that `overlap=pipeline` alone pipelines; 1 is the control that equals
  // overlap = none bitwise.
  int64_t overlap_chunks = 2;
  GemmConfig gemm;
  // The sync-free step captured in one CUDA graph in warm-up and replayed in the timed steps (on
  // the CPU backend: the same sync-free step, run as issued).
  bool graph = false;
  int64_t steps = 20;
  int64_t warmup = 3;
  // Seconds the untimed steps last at least: after the warm-up, steps like the timed ones run until
  // this much time has passed since the first step (0: none), so that the timed steps meet a GPU
  // whose clocks have settled under its power or thermal limit.
  double warmup_s = 0;
  uint64_t seed = 1234;
  CheckMode check = CheckMode::kFirst;
  // With FP8: also the reference without quantization, for the distance FP8 costs. A check of
  // every step may not want its time: a third of DeepSeek-V3's FP8 check at EP 2 on the GPU
  // (about 33 of 88 s), 30% of a float64 one.
  bool check_unquantized = true;
  ReferenceDevice reference = ReferenceDevice::kAuto;
  bool roofline = true;
};

// The most timed or warm-up steps a run takes (10^7: over 13 hours at 5 ms a step), so that step
// counts and their sums never overflow.
constexpr int64_t kMaxSteps = 10000000;
// The most chunks overlap = pipeline cuts a step into: each chunk pays its own counts exchange
// (a collective and a host copy) and four collectives, which only grow past a few chunks.
constexpr int64_t kMaxOverlapChunks = 64;
// The chunks a step runs in: overlap_chunks with overlap = pipeline, else 1.
int64_t step_chunks(const Workload& w);
// What one chunk of a step is to its dispatcher: w with tokens_per_rank / step_chunks(w) tokens,
// in one chunk (w itself where the step has one).
Workload chunk_workload(const Workload& w);
// The most shared experts a workload may have: published models have 1 to 8 (a bound that keeps
// every product of shapes far from overflow).
constexpr int64_t kMaxSharedExperts = 64;

// Parses JSON text into a workload. Throws UserError naming the key (unknown keys, wrong types,
// bad enum values) or, for malformed JSON, the line and column.
Workload workload_from_json_text(const std::string& text, const std::string& source_name);
// A file may build on another with "base": "<path relative to it>": the base is read first and
// the file's keys merged over it (objects key by key), chains up to 8 files, no cycles.
Workload load_workload_file(const std::string& path);

// Applies one "--set a.b.c=value" override, type-checked against the key's type.
void apply_override(Workload& w, const std::string& assignment);

// Resolves mesh "auto" against the world size, then checks every constraint. Throws UserError
// whose message names the key and the fix.
void resolve_and_validate(Workload& w, int world_size);

// Bytes one rank needs for the step's buffers (the buffer plan MoeLayer allocates from, with
// balanced routing; the dispatcher's) plus the reference path's when check != off. Used to refuse
// a workload that cannot fit before allocating anything. storage_bytes and grad_bytes: per stored
// element and per expert weight gradient element as the backend keeps them (the CPU backend: 4
// and 4). A workload whose mesh is still "auto" is resolved on a copy.
int64_t estimate_rank_bytes(const Workload& w, int world_size);  // the CPU backend's
int64_t estimate_rank_bytes(const Workload& w, int world_size, int storage_bytes, int grad_bytes);
// The step's part of that by what the buffers hold (--dry-run's memory line), check aside: the
// router's and experts' weights, their gradients, the expert-major rows (ragged, with their
// growth headroom), the per-token buffers, the shared experts' buffers, the dispatcher's, and
// for the CUDA backend (cuda) its FP8 codes and scratch (core/fp8_buffers.h; 0 for bf16) and its
// router and layout kernels' scratch (core/router_scratch.h).
struct StepMemory {
  int64_t weights = 0, gradients = 0, expert_rows = 0, tokens = 0, shared_experts = 0;
  int64_t dispatcher = 0, fp8 = 0, kernel_scratch = 0;
  // Each part with its JSON key and the words --dry-run's line gives it, in that line's order.
  struct Part {
    const char* key;
    const char* what;
    int64_t bytes;
  };
  std::vector<Part> parts() const;
  int64_t total() const;
};
StepMemory estimate_step_memory(const Workload& w, int world_size, int storage_bytes,
                                int grad_bytes, bool cuda = false);

// The check's reference: host bytes and (reference on the GPU) device bytes per rank. On the CPU
// it holds every expert in float64; on the GPU, the world's tokens and one expert at a time.
// Host bytes include the backend's results copied to the host for the comparison.
struct ReferenceBytes {
  int64_t host = 0, device = 0;
};
ReferenceBytes estimate_reference_bytes(const Workload& w, int world_size, bool on_gpu);

nlohmann::json workload_to_json(const Workload& w);

// Whether a key ("router.score", "gemm.method") defines the work of a step, as opposed to how the
// backend runs it (overlap, gemm.*) or how the run is taken (steps, check, ...). Results that
// differ only in the latter compare. Unknown paths count as work.
bool workload_key_changes_work(const std::string& path);
// The keys of how the run is taken ("name, steps, ..."), in key-table order: what results that
// compare may differ in besides how the backend runs the work (describe_how_keys).
std::string workload_run_keys();

// "overlap=none gemm.method=auto gemm.streams=4 gemm.algo=auto": the keys of how the backend runs
// the work, for the report header and --dry-run.
std::string describe_how_keys(const Workload& w);

// The configuration reference as a Markdown table (key, type, default, meaning), made from the key
// table: `moebench keys` prints it and docs/configuration.md holds it (a test keeps them equal).
std::string workload_keys_markdown();

}  // namespace moe
