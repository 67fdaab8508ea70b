// The workload's keys: one table from which the JSON reader, --set, workload_to_json and the
// documented configuration table all come. A key is added here and in its struct field, nowhere
// else; resolve_and_validate (workload.cpp) checks the ranges that depend on other keys.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/workload.h"

namespace moe {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Each enum's JSON names, in declaration order: the one place they are spelled.

template <class Enum>
const std::vector<std::string>& names_of();
#define MOE_ENUM_NAMES(Enum, ...)                                   \
  template <>                                                       \
  const std::vector<std::string>& names_of<Enum>() {                \
    static const std::vector<std::string> names = {__VA_ARGS__};    \
    return names;                                                   \
  }                                                                 \
  const char* name_of(Enum value) {                                 \
    return names_of<Enum>().at(static_cast<size_t>(value)).c_str(); \
  }
MOE_ENUM_NAMES(DType, "bf16", "fp32")
MOE_ENUM_NAMES(Precision, "bf16", "fp8_tensor", "fp8_block")
MOE_ENUM_NAMES(DispatchDtype, "bf16", "fp8")
MOE_ENUM_NAMES(Fp8Weights, "per_step", "cached")
MOE_ENUM_NAMES(RouterScore, "softmax", "sigmoid")
MOE_ENUM_NAMES(RoutingMode, "learned", "uniform", "balanced", "powerlaw", "hot")
MOE_ENUM_NAMES(DropPolicy, "probability", "position")
MOE_ENUM_NAMES(DispatchKind, "alltoall", "allgather", "alltoall_dedup", "nvlink")
MOE_ENUM_NAMES(ExpertPlacement, "contiguous", "balanced")
MOE_ENUM_NAMES(CheckMode, "first", "every", "off")
MOE_ENUM_NAMES(ReferenceDevice, "auto", "cpu", "gpu")
MOE_ENUM_NAMES(Overlap, "none", "dispatch_bwd", "pipeline")
MOE_ENUM_NAMES(GemmMethod, "auto", "lt_multistream", "grouped_batched", "grouped_sm90")
MOE_ENUM_NAMES(GemmAlgo, "auto", "bucket", "exact", "tuned")
MOE_ENUM_NAMES(Sm90Schedule, "cooperative", "pingpong")
#undef MOE_ENUM_NAMES

const std::vector<std::string>& dispatcher_names() { return names_of<DispatchKind>(); }

namespace {

// ---------------------------------------------------------------------------------------------
// The table. A key's kind says which JSON values it takes; its field reads and writes the struct
// member (a generic lambda, so that one accessor serves const and non-const workloads).

enum class Kind {
  kString,          // any string
  kInt,             // any int64 (ranges are checked by resolve_and_validate, which names the fix)
  kUint,            // non-negative, up to 2^64 - 1 (the seed)
  kNumber,          // integer or floating point
  kBool,            // true or false
  kEnum,            // a string from `choices`
  kSize,            // a positive integer or "auto" (the mesh; "auto" is stored as 0)
  kOptionalNumber,  // a number or null (stored as 0)
};

// What a key is to a comparison of two runs (compare refuses results whose work differs).
enum class Role {
  kWork,  // defines the work of a step: the model, routing, mesh, dtypes
  kHow,   // how the backend runs the same work (a schedule, a GEMM path): what A/B runs vary
  kRun,   // how the run is taken: labels, step counts, checking, calibration
};

struct KeySpec {
  std::string path;
  Kind kind;
  std::vector<std::string> choices;  // kEnum only
  std::string doc;                   // the meaning column of docs/configuration.md
  bool required = false;
  Role role = Role::kWork;
  // The report's knobs line leaves the key out while it holds its default ("auto", 0: a key that
  // rarely differs from it and would only lengthen the line).
  bool listed_when_set = false;
  std::function<json(const Workload&)> get;         // the JSON form of the field
  std::function<void(Workload&, const json&)> set;  // from a value that passed the kind's check
};

KeySpec spec(const char* path, Kind kind, std::vector<std::string> choices, std::string doc) {
  KeySpec k;
  k.path = path;
  k.kind = kind;
  k.choices = std::move(choices);
  k.doc = std::move(doc);
  return k;
}

// Marks a key as a knob of how the work is run, or of how the run is taken (Role).
KeySpec how(KeySpec k) {
  k.role = Role::kHow;
  return k;
}
KeySpec run(KeySpec k) {
  k.role = Role::kRun;
  return k;
}
KeySpec listed_when_set(KeySpec k) {
  k.listed_when_set = true;
  return k;
}

#define MOE_FIELD(member) \
  [](auto& w) -> auto& { return w.member; }

template <class Field>
KeySpec plain_key(const char* path, Kind kind, Field field, std::string doc) {
  KeySpec k = spec(path, kind, {}, std::move(doc));
  k.get = [field](const Workload& w) { return json(field(w)); };
  k.set = [field](Workload& w, const json& v) {
    using T = std::remove_reference_t<decltype(field(w))>;
    field(w) = v.get<T>();
  };
  return k;
}

template <class Field>
KeySpec int_key(const char* path, Field field, std::string doc) {
  return plain_key(path, Kind::kInt, field, std::move(doc));
}

template <class Field>
KeySpec required_int_key(const char* path, Field field, std::string doc) {
  KeySpec k = plain_key(path, Kind::kInt, field, std::move(doc));
  k.required = true;
  return k;
}

template <class Field>
KeySpec enum_key(const char* path, Field field, std::string doc) {
  using Enum =
      std::remove_const_t<std::remove_reference_t<decltype(field(std::declval<Workload&>()))>>;
  KeySpec k = spec(path, Kind::kEnum, names_of<Enum>(), std::move(doc));
  k.get = [field](const Workload& w) { return json(name_of(field(w))); };
  k.set = [field](Workload& w, const json& v) {
    const std::vector<std::string>& names = names_of<Enum>();
    const auto it = std::find(names.begin(), names.end(), v.get<std::string>());
    field(w) = static_cast<Enum>(it - names.begin());  // the reader checked it is one of them
  };
  return k;
}

// A mesh size: "auto" is stored as 0.
template <class Field>
KeySpec size_key(const char* path, Field field, std::string doc) {
  KeySpec k = spec(path, Kind::kSize, {}, std::move(doc));
  k.get = [field](const Workload& w) { return field(w) == 0 ? json("auto") : json(field(w)); };
  k.set = [field](Workload& w, const json& v) { field(w) = v.is_string() ? 0 : v.get<int64_t>(); };
  return k;
}

// A number or null: null is stored as 0.
template <class Field>
KeySpec optional_number_key(const char* path, Field field, std::string doc) {
  KeySpec k = spec(path, Kind::kOptionalNumber, {}, std::move(doc));
  k.get = [field](const Workload& w) { return field(w) > 0 ? json(field(w)) : json(nullptr); };
  k.set = [field](Workload& w, const json& v) { field(w) = v.is_null() ? 0.0 : v.get<double>(); };
  return k;
}

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> keys = {
      run(plain_key("name", Kind::kString, MOE_FIELD(name), "label copied into the results")),
      required_int_key("model.hidden", MOE_FIELD(model.hidden), "H, the model width"),
      required_int_key("model.ffn", MOE_FIELD(model.ffn),
                       "F, each expert's FFN width (w_in is [H, 2F], w_out [F, H])"),
      required_int_key("model.experts", MOE_FIELD(model.experts), "E, number of experts"),
      required_int_key("model.topk", MOE_FIELD(model.topk), "K, experts per token"),
      int_key("model.shared_experts", MOE_FIELD(model.shared_experts),
              "S, shared experts: dense SwiGLU FFNs every token passes through with weight 1, "
              "added to the routed output (DeepSeek-V3: 1); 0 = none"),
      int_key("model.shared_ffn", MOE_FIELD(model.shared_ffn),
              "F_sh, each shared expert's FFN width (w_sh_in is [S, H, 2F_sh], w_sh_out "
              "[S, F_sh, H]); needed when model.shared_experts > 0"),
      enum_key("router.score", MOE_FIELD(router.score), "score function over the router logits"),
      plain_key("router.softmax_after_topk", Kind::kBool, MOE_FIELD(router.softmax_after_topk),
                "Mixtral style: p = softmax of the K selected logits (softmax only)"),
      plain_key("router.normalize_topk", Kind::kBool, MOE_FIELD(router.normalize_topk),
                "divide the K weights by their sum"),
      plain_key("router.scaling", Kind::kNumber, MOE_FIELD(router.scaling),
                "multiplies the final weights p"),
      int_key("router.groups", MOE_FIELD(router.groups),
              "G, contiguous expert groups for group-limited routing (1 = off)"),
      int_key("router.group_topk", MOE_FIELD(router.group_topk), "Gk, groups kept per token"),
      plain_key("router.expert_bias", Kind::kBool, MOE_FIELD(router.expert_bias),
                "add a per-expert bias to the selection scores only (no gradient)"),
      plain_key("router.aux_coeff", Kind::kNumber, MOE_FIELD(router.aux_coeff),
                "load-balancing (switch) loss coefficient, 0 = off"),
      plain_key("router.z_coeff", Kind::kNumber, MOE_FIELD(router.z_coeff),
                "router z-loss coefficient, 0 = off"),
      enum_key("routing.mode", MOE_FIELD(routing.mode),
               "who picks each token's K experts: the gate, or a seeded pattern (README, Routing "
               "controls)"),
      plain_key("routing.skew", Kind::kNumber, MOE_FIELD(routing.skew),
                "powerlaw: an expert's weight is 1 / (popularity rank + 1)^skew"),
      plain_key("routing.hot_fraction", Kind::kNumber, MOE_FIELD(routing.hot_fraction),
                "hot: share of tokens sent to the hot experts"),
      int_key("routing.hot_experts", MOE_FIELD(routing.hot_experts),
              "hot: how many experts are hot"),
      required_int_key("tokens_per_rank", MOE_FIELD(tokens_per_rank),
                       "T, tokens on each rank per step"),
      size_key("mesh.ep", MOE_FIELD(mesh.ep), "expert-parallel group size"),
      size_key("mesh.fsdp", MOE_FIELD(mesh.fsdp),
               "FSDP group size (shards each EP rank's expert weights)"),
      enum_key("dtype", MOE_FIELD(dtype), "storage dtype of x, weights and dout (math is fp32)"),
      enum_key(
          "expert_grad_dtype", MOE_FIELD(expert_grad_dtype),
          "expert weight gradients and their FSDP reduce-scatter: fp32 (main grads, as "
          "Megatron keeps them) or bf16 (the parameters' dtype, as eager PyTorch makes them: "
          "half the bytes the wgrad GEMMs write and the reduce-scatter sends); accumulation is "
          "fp32 either way; bf16 needs `dtype` bf16"),
      enum_key("precision", MOE_FIELD(precision),
               "the expert GEMMs (routed and shared; forward, data and weight gradients): bf16 "
               "multiplies the stored values; fp8_tensor quantizes each operand of each "
               "expert's GEMM to FP8 E4M3 with one scale (per-tensor current scaling, as "
               "TransformerEngine trains), fp8_block in DeepSeek-V3's 1 x 128 (activations, "
               "gradients) and 128 x 128 (weights) blocks; fp32 accumulation either way; fp8 "
               "needs dtype bf16, and on the CUDA backend (cuBLASLt's FP8 matmul per expert, "
               "or the grouped sm90 kernel) align a multiple of 16 and gemm.method auto, "
               "lt_multistream or grouped_sm90 (the grouped kernel with graph true); checked "
               "by a reference that quantizes the same operands (README, FP8)"),
      enum_key("dispatch_dtype", MOE_FIELD(dispatch_dtype),
               "the rows dispatched to the experts, on the wire (every dispatcher): bf16 as "
               "stored, or fp8 (with precision fp8_block): each token's row quantized once on its "
               "rank to e4m3 codes and 1 x 128 scales (H + 4 H / 128 bytes, padded to 16, "
               "about half of bf16's 2 H), which the up projection multiplies as they are and "
               "the weight gradient takes back in bf16; the combine and both backward directions "
               "stay bf16 (docs/layer.md, FP8 dispatch)"),
      enum_key("dispatch", MOE_FIELD(dispatch),
               "how routed rows reach their experts: alltoall sends each (token, expert) row "
               "to its expert's rank; alltoall_dedup sends a token once to each rank its kept "
               "experts are on (with their slots and weights), sums their weighted outputs there "
               "and returns one row per (token, rank), the partial sums in the storage dtype "
               "(DeepEP's deduplicated dispatch: never more rows than alltoall); allgather gives "
               "every EP rank every token (and the routing), each rank's experts take theirs and "
               "a reduce-scatter returns the weighted sums in fp32 (Megatron's allgather "
               "dispatcher; with bf16 fewer bytes than alltoall where mesh.ep < 2/3 "
               "model.topk); nvlink moves alltoall_dedup's rows with our own kernels straight "
               "into the other ranks' GPU memory (CUDA IPC over NVLink, one host, mesh.ep <= 8; "
               "MPI shared memory on the CPU backend), no NCCL call and no host sync; at "
               "mesh.ep 1 every value runs alltoall's local path (nothing crosses a wire); "
               "docs/layer.md compares them"),
      how(enum_key("expert_placement", MOE_FIELD(expert_placement),
                   "which EP rank holds which expert: contiguous gives EP rank r experts [r * E / "
                   "mesh.ep, (r + 1) * E / mesh.ep); balanced deals them out by the rows the "
                   "first step routes to each (largest first, to the rank with the fewest rows "
                   "so far; DeepSeek's EPLB without replicas), so that no rank waits in the "
                   "all-to-alls for one with more rows; out and dx equal contiguous's within the "
                   "dispatcher's rounding (bitwise with alltoall), the expert gradients are the "
                   "same per expert, each on the rank that holds it (docs/layer.md)")),
      optional_number_key("capacity_factor", MOE_FIELD(capacity_factor),
                          "rows each source rank may send an expert: ceil(capacity_factor * T * "
                          "K / E), at most 10^6, with overlap pipeline per chunk (T / "
                          "overlap_chunks tokens); null = dropless"),
      enum_key("drop_policy", MOE_FIELD(drop_policy),
               "which rows over the capacity are dropped: lowest p, or latest (t, k)"),
      int_key("align", MOE_FIELD(align),
              "pad each local expert's rows to a multiple of this (16, 128) for the GEMMs"),
      how(enum_key("overlap", MOE_FIELD(overlap),
                   "which phases run beside others: dispatch_bwd runs the backward all-to-all of "
                   "dx and the unpermute beside the weight-gradient GEMMs (and the shared experts' "
                   "backward), and the shared experts' forward beside dispatch_fwd (results "
                   "bitwise equal); pipeline cuts the tokens into overlap_chunks chunks whose "
                   "dispatch and combine run beside another chunk's expert GEMMs, forward and "
                   "backward, the weight gradients once over every chunk's rows (the rows none "
                   "multiplies, in its order: equal within GEMM rounding; a capacity applies per "
                   "chunk) (docs/layer.md)")),
      how(int_key("overlap_chunks", MOE_FIELD(overlap_chunks),
                  "overlap pipeline: chunks of tokens_per_rank (must divide it), 1 to 64; 1 "
                  "equals overlap none bitwise; read only with overlap pipeline")),
      how(enum_key(
          "gemm.method", MOE_FIELD(gemm.method),
          "CUDA expert GEMMs: auto chooses per expert GEMM in warm-up; lt_multistream is a "
          "cuBLASLt call per expert over side streams; grouped_batched one "
          "cublasGemmGroupedBatchedEx call; grouped_sm90 moebench's own Hopper kernel, "
          "one launch per GEMM for all experts (bf16 and both FP8 recipes; falls back to "
          "lt_multistream where a shape does not suit it) (the CPU backend takes auto "
          "only)")),
      how(int_key("gemm.streams", MOE_FIELD(gemm.streams),
                  "CUDA: side streams the per-expert GEMM loop spreads over, 1 to 32")),
      how(int_key("gemm.sm90_cluster", MOE_FIELD(gemm.sm90_cluster),
                  "CUDA grouped_sm90: CTAs per cluster, 1 or 2 (2: neighbouring row tiles share "
                  "each weight tile's load by TMA multicast, halving its traffic from L2; "
                  "results are bitwise equal)")),
      how(enum_key("gemm.sm90_schedule", MOE_FIELD(gemm.sm90_schedule),
                   "CUDA grouped_sm90: cooperative (both MMA warpgroups on one 128 x 256 or "
                   "128 x 128 tile) or pingpong (a 128 x 128 tile each, taking turns at the "
                   "tensor cores so that one's epilogue runs beside the other's MMAs; needs "
                   "gemm.sm90_cluster 1; results are bitwise equal)")),
      listed_when_set(how(int_key(
          "gemm.sm90_ctas", MOE_FIELD(gemm.sm90_ctas),
          "CUDA grouped_sm90: at most this many persistent CTAs, 0 to 1024 (0: one per SM, as "
          "many as fit); fewer leave SMs to the collectives that overlap pipeline runs beside "
          "the GEMMs, whose CTAs otherwise wait for them (results are bitwise equal)"))),
      listed_when_set(
          how(enum_key("gemm.method_up", MOE_FIELD(gemm.methods[size_t(ExpertGemm::kUp)]),
                       "CUDA: the up projection's method (with SwiGLU) instead of gemm.method's, "
                       "which must then be fixed; auto: gemm.method's. With the five below, reruns "
                       "a per_gemm choice (the result's gemm.methods)"))),
      listed_when_set(
          how(enum_key("gemm.method_down", MOE_FIELD(gemm.methods[size_t(ExpertGemm::kDown)]),
                       "CUDA: the down projection's method, as gemm.method_up"))),
      listed_when_set(how(
          enum_key("gemm.method_dgrad_a", MOE_FIELD(gemm.methods[size_t(ExpertGemm::kDgradA)]),
                   "CUDA: the data gradient through w_out's method (with SwiGLU's backward), as "
                   "gemm.method_up"))),
      listed_when_set(
          how(enum_key("gemm.method_dgrad_x", MOE_FIELD(gemm.methods[size_t(ExpertGemm::kDgradX)]),
                       "CUDA: the data gradient through w_in's method, as gemm.method_up"))),
      listed_when_set(how(enum_key("gemm.method_wgrad_out",
                                   MOE_FIELD(gemm.methods[size_t(ExpertGemm::kWgradOut)]),
                                   "CUDA: w_out's weight gradient's method, as gemm.method_up"))),
      listed_when_set(how(enum_key("gemm.method_wgrad_in",
                                   MOE_FIELD(gemm.methods[size_t(ExpertGemm::kWgradIn)]),
                                   "CUDA: w_in's weight gradient's method, as gemm.method_up"))),
      how(plain_key("gemm.sm90_fuse_swiglu", Kind::kBool, MOE_FIELD(gemm.sm90_fuse_swiglu),
                    "CUDA grouped_sm90: SwiGLU in the up projection's epilogue and its backward "
                    "in the data gradient's, instead of separate kernels (bitwise equal)")),
      how(enum_key(
          "gemm.algo", MOE_FIELD(gemm.algo),
          "CUDA: how cuBLASLt algorithms are chosen for new GEMM shapes: auto by GEMM size, "
          "bucket one heuristic query per bucket of row counts, exact one per shape, tuned the "
          "fastest of the query's first " +
              std::to_string(kGemmTuneCandidates) +
              " per bucket, timed in the run (two runs may choose and round differently)")),
      listed_when_set(how(
          enum_key("fp8_weights", MOE_FIELD(fp8_weights),
                   "when an FP8 step quantizes the expert weights (routed and shared, both ways "
                   "round): per_step in every step, inside experts_fwd, as one training step per "
                   "optimizer step does; cached once, in the first warm-up step, the timed steps "
                   "reusing the codes, as TransformerEngine does over the microbatches of one "
                   "optimizer step (the weights change only there): the report then gives one "
                   "quantization's time beside the step, to spread over your microbatches (the "
                   "CPU backend quantizes inside each GEMM and keeps nothing); cached needs an "
                   "fp8 precision and warmup >= 1"))),
      how(plain_key("graph", Kind::kBool, MOE_FIELD(graph),
                    "a sync-free step (the counts never reach the host: buffers hold the most "
                    "rows any routing gives, the expert GEMMs read device offsets) captured in "
                    "one CUDA graph in the last warm-up step and replayed in the timed ones "
                    "(bitwise equal to graph false); needs dispatch nvlink or allgather (any "
                    "mesh.ep) or any dispatch at mesh.ep 1, warmup >= 2 and, on the CUDA "
                    "backend, gemm.method grouped_sm90 or auto with bf16; the CPU backend runs "
                    "the sync-free step as issued")),
      run(int_key("steps", MOE_FIELD(steps), "timed steps")),
      run(int_key("warmup", MOE_FIELD(warmup),
                  "untimed steps before timing (with gemm.method auto on the CUDA backend, steps "
                  "are added where this is fewer than two per method tried and four for the "
                  "per-GEMM mix against the fastest, and the choice then warms up this many "
                  "steps of its own)")),
      run(plain_key("warmup_s", Kind::kNumber, MOE_FIELD(warmup_s),
                    "seconds the untimed steps last at least: after the warm-up, untimed steps "
                    "like the timed ones (the first timed step's inputs) run until this long "
                    "after the first step, so that the timed steps meet the GPU's steady clocks "
                    "(one at its power limit lowers them a second or more into a load); 0 = "
                    "none")),
      plain_key("seed", Kind::kUint, MOE_FIELD(seed), "seed of every weight and token"),
      run(enum_key(
          "check",
          MOE_FIELD(check),
          "compare with the reference on the first timed step, every timed step, or never")),
      run(plain_key(
          "check_unquantized", Kind::kBool, MOE_FIELD(check_unquantized),
          "with FP8 precision, the check also runs the reference without "
          "quantization, for information (the report's \"vs bf16\", what FP8 "
          "costs); false saves its time (the GPU reference: about a third of an FP8 check)")),
      run(enum_key(
          "reference", MOE_FIELD(reference),
          "where the reference's dense arithmetic runs: float64 on the host, or fp32 on the "
          "GPU (cuda backend only; FP8's activations are quantized on the host either way); auto = "
          "the backend's device (README, Correctness)")),
      run(plain_key(
          "roofline", Kind::kBool, MOE_FIELD(roofline),
          "measure the dense GEMM rate and the EP all-to-all bandwidth at start-up, for the "
          "report's floors and efficiencies; false skips it")),
  };
  return keys;
}
#undef MOE_FIELD

const KeySpec* find_key(const std::string& path) {
  for (const KeySpec& k : schema())
    if (k.path == path) return &k;
  return nullptr;
}

std::string section_of(const std::string& path) {
  const size_t dot = path.find('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

std::string last_part(const std::string& path) { return path.substr(path.rfind('.') + 1); }

// The sections ("model", "router", ...): the first parts of the dotted keys.
std::vector<std::string> sections() {
  std::vector<std::string> out;
  for (const KeySpec& k : schema()) {
    const std::string s = section_of(k.path);
    if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return out;
}

bool is_section(const std::string& name) {
  const std::vector<std::string> all = sections();
  return std::find(all.begin(), all.end(), name) != all.end();
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::vector<std::string> quoted(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& s : items) out.push_back("\"" + s + "\"");
  return out;
}

// A JSON value as the user wrote it, cut short so one bad value cannot flood the terminal.
std::string show(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// ---------------------------------------------------------------------------------------------
// Suggestions: the closest candidate within edit distance 2 (optimal string alignment, so that a
// swapped pair of letters counts as one edit).

int edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = int(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = int(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

// "" when nothing is close; the first candidate wins a tie.
std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  int best_d = 3;
  for (const std::string& c : candidates) {
    if (word.size() > c.size() + 2 || c.size() > word.size() + 2) continue;  // too far anyway
    int d = edit_distance(word, c);
    if (d < best_d) best = c, best_d = d;
  }
  return best;
}

[[noreturn]] void unknown_key(const std::string& path, const std::string& source) {
  std::ostringstream os;
  os << "unknown key '" << path << "' in " << source;
  std::vector<std::string> candidates = sections();
  for (const KeySpec& k : schema()) candidates.push_back(k.path);
  std::string guess = closest(path, candidates);
  // A right key at the wrong level ("hidden" at the top, "router.ep"): match on its last part.
  if (guess.empty()) {
    for (const KeySpec& k : schema())
      if (last_part(k.path) == last_part(path)) guess = k.path;
  }
  if (!guess.empty()) {
    os << "; did you mean '" << guess << "'?";
  } else {
    // List the keys of the level the unknown key sits in.
    const std::string section = section_of(path);
    std::vector<std::string> known;
    if (!is_section(section)) {
      for (const KeySpec& k : schema()) {
        std::string top = k.path.substr(0, k.path.find('.'));
        if (std::find(known.begin(), known.end(), top) == known.end()) known.push_back(top);
      }
      os << "; known keys: " << join(known, ", ");
    } else {
      for (const KeySpec& k : schema())
        if (section_of(k.path) == section) known.push_back(last_part(k.path));
      os << "; known " << section << " keys: " << join(known, ", ");
    }
  }
  throw UserError(os.str());
}

// The value at "key" or "section.key", or nullptr when absent.
const json* lookup(const json& root, const std::string& path) {
  const size_t dot = path.find('.');
  const json* node = &root;
  if (dot != std::string::npos) {
    auto it = root.find(path.substr(0, dot));
    if (it == root.end() || !it->is_object()) return nullptr;
    node = &*it;
  }
  auto it = node->find(path.substr(dot + 1));  // npos + 1 == 0: the whole path
  return it == node->end() ? nullptr : &*it;
}

// ---------------------------------------------------------------------------------------------
// Loading: structure checks first (unknown keys, sections are objects, required keys), then one
// kind check and one set per key present. An absent key leaves the field at its default.

void check_structure(const json& root, const std::string& source) {
  MOE_USER_CHECK(root.is_object(),
                 source << ": expected a JSON object ({...}) at the top level, got " << show(root));
  for (const auto& item : root.items()) {
    const std::string& key = item.key();
    if (is_section(key)) {
      MOE_USER_CHECK(item.value().is_object(), "key '" << key << "' in " << source
                                                       << ": expected an object ({...}), got "
                                                       << show(item.value()));
      for (const auto& sub : item.value().items()) {
        const std::string path = key + "." + sub.key();
        if (!find_key(path)) unknown_key(path, source);
      }
    } else if (key.find('.') != std::string::npos && find_key(key)) {
      // {"router.groups": 2} would be silently ignored: keys nest, they are not dotted.
      const size_t dot = key.find('.');
      throw UserError("key '" + key + "' in " + source + " must be nested: write \"" +
                      key.substr(0, dot) + "\": {\"" + key.substr(dot + 1) + "\": ...}");
    } else if (!find_key(key)) {
      unknown_key(key, source);
    }
  }
  std::vector<std::string> required, missing;
  for (const KeySpec& k : schema()) {
    if (!k.required) continue;
    required.push_back(k.path);
    if (!lookup(root, k.path)) missing.push_back(k.path);
  }
  MOE_USER_CHECK(missing.empty(), source << ": missing required key"
                                         << (missing.size() > 1 ? "s" : "") << " "
                                         << join(missing, ", ") << "; every workload gives "
                                         << join(required, ", "));
}

[[noreturn]] void wrong_value(const KeySpec& key, const std::string& source,
                              const std::string& expected, const json& got,
                              const std::string& hint = "") {
  throw UserError("key '" + key.path + "' in " + source + ": " + expected + ", got " + show(got) +
                  hint);
}

bool fits_int64(const json& v) {
  return v.is_number_integer() &&
         !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX));
}

// Throws, naming the key, what it takes and what it got, unless v is a value of the key's kind.
void check_kind(const KeySpec& key, const json& v, const std::string& source) {
  switch (key.kind) {
    case Kind::kString:
      if (!v.is_string()) wrong_value(key, source, "expected a string", v);
      return;
    case Kind::kInt:
      if (!fits_int64(v))
        wrong_value(key, source,
                    v.is_number_integer() ? "expected an integer (this one is out of range)"
                                          : "expected an integer",
                    v);
      return;
    case Kind::kUint:
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
        wrong_value(key, source, "expected a non-negative integer (up to 2^64 - 1)", v);
      return;
    case Kind::kNumber:
      if (!v.is_number()) wrong_value(key, source, "expected a number", v);
      return;
    case Kind::kBool:
      if (!v.is_boolean()) wrong_value(key, source, "expected true or false", v);
      return;
    case Kind::kEnum: {
      const std::string expected = "expected one of " + join(quoted(key.choices), ", ");
      if (!v.is_string()) wrong_value(key, source, expected, v);
      const std::string s = v.get<std::string>();
      if (std::find(key.choices.begin(), key.choices.end(), s) != key.choices.end()) return;
      const std::string guess = closest(s, key.choices);
      wrong_value(key, source, expected, v,
                  guess.empty() ? "" : "; did you mean \"" + guess + "\"?");
    }
    case Kind::kSize:
      if (v.is_string() && v.get<std::string>() == "auto") return;
      if (!fits_int64(v) || v.get<int64_t>() <= 0)
        wrong_value(key, source, "expected a positive integer or \"auto\"", v);
      return;
    case Kind::kOptionalNumber:
      if (!v.is_null() && !v.is_number()) wrong_value(key, source, "expected a number or null", v);
      return;
  }
}

Workload from_json(const json& root, const std::string& source) {
  check_structure(root, source);
  Workload w;
  for (const KeySpec& key : schema()) {
    const json* v = lookup(root, key.path);
    if (!v) continue;
    check_kind(key, *v, source);
    key.set(w, *v);
  }
  return w;
}

std::string trim(const std::string& s) {
  const char* space = " \t\r\n";
  size_t b = s.find_first_not_of(space);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(space) - b + 1);
}

// The JSON value for "--set key=text", by the key's kind. Anything that does not parse as the
// kind is passed on as a string, so that the loader reports it with the key's expected type.
json override_value(const KeySpec& key, const std::string& text) {
  const bool quoted_text = text.size() >= 2 && text.front() == '"' && text.back() == '"';
  switch (key.kind) {
    case Kind::kString:
    case Kind::kEnum:
      // Raw text, so that name=42 stays the string "42"; a quoted value is unquoted by JSON.
      if (quoted_text) {
        json v = json::parse(text, nullptr, false);
        if (v.is_string()) return v;
      }
      return json(text);
    case Kind::kBool:
      if (text == "1") return json(true);
      if (text == "0") return json(false);
      break;
    default:
      break;
  }
  json v = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return v.is_discarded() ? json(text) : v;
}

// Deeper than any workload needs: refused before a hostile document can exhaust a stack.
constexpr int kMaxJsonDepth = 32;

// Parses text, refusing what nlohmann's parser would accept silently or report without the file:
// duplicate keys (the last one would win), absurd nesting, numbers outside the double range.
json parse_workload_json(const std::string& text, const std::string& source) {
  std::vector<std::set<std::string>> keys_seen;  // per open object
  std::vector<std::string> path;                 // the keys leading to the value being read
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    MOE_USER_CHECK(depth <= kMaxJsonDepth, source << ": JSON nested deeper than " << kMaxJsonDepth
                                                  << " levels; a workload is at most 2 levels "
                                                     "deep (see docs/configuration.md)");
    if (event == json::parse_event_t::object_start) keys_seen.emplace_back();
    if (event == json::parse_event_t::object_end) keys_seen.pop_back();
    if (event == json::parse_event_t::key) {
      const std::string key = parsed.get<std::string>();
      path.resize(std::max(depth, 1) - 1);
      path.push_back(key);
      MOE_USER_CHECK(keys_seen.back().insert(key).second,
                     "duplicate key '" << join(path, ".") << "' in " << source
                                       << ": JSON readers disagree on which one wins; keep "
                                          "one of them");
    }
    return true;
  };
  try {
    return json::parse(text, on_event);
  } catch (const json::parse_error& e) {
    // e.byte counts the bytes read, up to and including the offending one.
    const size_t at = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at; ++i) {
      if (text[i] == '\n') {
        line++;
        column = 1;
      } else {
        column++;
      }
    }
    // nlohmann's text after its own prefix: "syntax error while parsing ... - unexpected '}'".
    std::string what = e.what();
    size_t syntax = what.find("syntax error");
    if (syntax != std::string::npos) what = what.substr(syntax);
    throw UserError("malformed JSON in " + source + " at line " + std::to_string(line) +
                    ", column " + std::to_string(column) + ": " + what);
  } catch (const json::out_of_range& e) {
    // "number overflow parsing '1e400'": a number beyond the double range.
    std::string what = e.what();
    const size_t at = what.find("number overflow");
    throw UserError(source + ": " + (at == std::string::npos ? what : what.substr(at)) +
                    "; numbers must be finite doubles (at most about 1.8e308)");
  }
}

}  // namespace

Workload workload_from_json_text(const std::string& text, const std::string& source_name) {
  return from_json(parse_workload_json(text, source_name), source_name);
}

namespace {

// How many files a chain of "base" keys may span: a workload built on a model shape is two.
constexpr int kMaxBaseDepth = 8;

// The file's JSON with its bases laid under it: a workload file may name another ("base":
// "../models/deepseek_v3.json", relative to its own directory), which is read first; this file's
// keys are then merged over it (RFC 7386 merge patch: objects merge key by key, any other value
// replaces the base's). `chain` holds the files being read, to refuse a cycle.
json load_workload_json(const std::string& path, std::vector<std::string>& chain) {
  std::error_code ec;
  MOE_USER_CHECK(!std::filesystem::is_directory(path, ec),
                 "workload file '" << path << "' is a directory; give a workload JSON file, e.g. "
                                   << "configs/tiny.json");
  MOE_USER_CHECK(std::filesystem::is_regular_file(path, ec),
                 "workload file '" << path
                                   << "' not found (relative paths start from the current "
                                      "directory "
                                   << std::filesystem::current_path(ec).string()
                                   << "; the shipped workloads are in configs/)");
  std::ifstream in(path, std::ios::binary);
  MOE_USER_CHECK(in, "cannot open workload file '" << path << "': " << std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  MOE_USER_CHECK(!in.bad(), "cannot read workload file '" << path << "': " << std::strerror(errno));
  json j = parse_workload_json(text.str(), path);
  if (!j.is_object() || !j.contains("base")) return j;
  const json& base = j["base"];
  MOE_USER_CHECK(base.is_string() && !base.get<std::string>().empty(),
                 path << ": \"base\" names the workload file this one builds on, as a string "
                      << "path relative to this file (e.g. \"../models/deepseek_v3.json\")");
  const std::filesystem::path base_path =
      std::filesystem::path(path).parent_path() / base.get<std::string>();
  MOE_USER_CHECK(std::filesystem::is_regular_file(base_path, ec),
                 path << ": \"base\" " << base.get<std::string>() << " is no file (looked for "
                      << base_path.string() << ", relative to this file's directory)");
  const std::string canonical = std::filesystem::weakly_canonical(base_path, ec).string();
  MOE_USER_CHECK(std::find(chain.begin(), chain.end(), canonical) == chain.end(),
                 path << ": \"base\" " << base.get<std::string>()
                      << " leads back to a file already being read; remove the cycle");
  MOE_USER_CHECK(int(chain.size()) < kMaxBaseDepth,
                 path << ": more than " << kMaxBaseDepth << " files chained by \"base\"");
  chain.push_back(canonical);
  json merged = load_workload_json(base_path.string(), chain);
  chain.pop_back();
  j.erase("base");
  merged.merge_patch(j);
  return merged;
}

}  // namespace

Workload load_workload_file(const std::string& path) {
  std::error_code ec;
  std::vector<std::string> chain = {std::filesystem::weakly_canonical(path, ec).string()};
  return from_json(load_workload_json(path, chain), path);
}

void apply_override(Workload& w, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  MOE_USER_CHECK(eq != std::string::npos, "--set '"
                                              << assignment << "' has no '='; write "
                                              << "--set key.path=value, e.g. --set model.topk=4");
  const std::string path = trim(assignment.substr(0, eq));
  const std::string text = trim(assignment.substr(eq + 1));
  const std::string source = "--set " + assignment;
  const KeySpec* key = find_key(path);
  if (!key) {
    if (is_section(path)) {
      std::string example;
      for (const KeySpec& k : schema())
        if (example.empty() && section_of(k.path) == path) example = k.path;
      throw UserError("'" + path + "' in " + source + " is a section, not a key; set one of its " +
                      "keys, e.g. --set " + example + "=...");
    }
    unknown_key(path, source);
  }
  const json v = override_value(*key, text);
  check_kind(*key, v, source);
  key->set(w, v);
}

json workload_to_json(const Workload& w) {
  json root = json::object();
  for (const KeySpec& key : schema()) {
    const std::string section = section_of(key.path);
    if (section.empty())
      root[key.path] = key.get(w);
    else
      root[section][last_part(key.path)] = key.get(w);
  }
  return root;
}

std::string describe_how_keys(const Workload& w) {
  std::string out;
  const Workload defaults;
  for (const KeySpec& k : schema()) {
    if (k.role != Role::kHow) continue;
    const json v = k.get(w);
    if (k.listed_when_set && v == k.get(defaults)) continue;
    out +=
        (out.empty() ? "" : " ") + k.path + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  }
  return out;
}

std::string workload_run_keys() {
  std::string out;
  for (const KeySpec& k : schema())
    if (k.role == Role::kRun) out += (out.empty() ? "" : ", ") + k.path;
  return out;
}

bool workload_key_changes_work(const std::string& path) {
  const KeySpec* k = find_key(path);
  return !k || k->role == Role::kWork;
}

std::string workload_keys_markdown() {
  auto type_of = [](const KeySpec& k) -> std::string {
    switch (k.kind) {
      case Kind::kString:
        return "string";
      case Kind::kInt:
        return "int";
      case Kind::kUint:
        return "int, 0 to 2^64 - 1";
      case Kind::kNumber:
        return "number";
      case Kind::kBool:
        return "bool";
      case Kind::kEnum: {
        std::vector<std::string> choices;
        for (const std::string& c : k.choices) choices.push_back("`\"" + c + "\"`");
        return join(choices, " \\| ");
      }
      case Kind::kSize:
        return "int \\| `\"auto\"`";
      case Kind::kOptionalNumber:
        return "number \\| `null`";
    }
    return "";
  };
  const Workload defaults;
  std::ostringstream os;
  os << "| key | type | default | meaning |\n|---|---|---|---|\n";
  for (const KeySpec& k : schema()) {
    const std::string dflt = k.required ? "**required**" : "`" + k.get(defaults).dump() + "`";
    os << "| `" << k.path << "` | " << type_of(k) << " | " << dflt << " | " << k.doc << " |\n";
  }
  return os.str();
}

}  // namespace moe
