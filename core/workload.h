#pragma once
// The workload: one plain struct per JSON object, loaded from configs/*.json, overridden by
// --set key.path=value, then validated. Every key but model.* has a default (see README).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace moe {

enum class DType { kBf16, kFp32 };
const char* dtype_name(DType d);

struct ModelShape {
  int64_t hidden = 0;   // H
  int64_t ffn = 0;      // F (per expert; w_in is [H, 2F])
  int64_t experts = 0;  // E
  int64_t topk = 0;     // K
};

struct RouterConfig {
  std::string score = "softmax";    // "softmax" | "sigmoid"
  bool softmax_after_topk = false;  // Mixtral style; only with softmax
  bool normalize_topk = false;
  double scaling = 1.0;
  int64_t groups = 1;      // G; 1 = no group-limited routing
  int64_t group_topk = 1;  // Gk, groups kept per token
  bool expert_bias = false;
  double aux_coeff = 0.0;
  double z_coeff = 0.0;
};

// Where tokens go. "learned" routes by the gate (MATH.md); the other modes force the expert set of
// every token from the seed (core/routing_modes.h) while the gate still weighs and is trained.
struct RoutingConfig {
  std::string mode = "learned";  // "learned" | "uniform" | "balanced" | "powerlaw" | "hot"
  double skew = 1.2;             // powerlaw: expert weight ~ 1 / popularity_rank^skew
  double hot_fraction = 0.5;     // hot: share of tokens that go to the hot experts
  int64_t hot_experts = 1;       // hot: how many experts are hot
};

struct MeshConfig {
  int64_t ep = 0;    // 0 = "auto"
  int64_t fsdp = 0;  // 0 = "auto"
};

enum class CheckMode { kOff, kFirst, kEvery };
const char* check_mode_name(CheckMode m);

struct Workload {
  std::string name = "unnamed";
  ModelShape model;
  RouterConfig router;
  RoutingConfig routing;
  int64_t tokens_per_rank = 0;  // T; 0 means "not given", an error
  MeshConfig mesh;
  DType dtype = DType::kBf16;
  // The expert weight gradients (dw_in, dw_out) and their FSDP reduce-scatter: fp32 (Megatron's
  // main grads) or bf16 (grads in the parameters' dtype, as eager PyTorch makes them; half the
  // bytes written by the wgrad GEMMs and sent by the reduce-scatter). Accumulation is fp32.
  DType expert_grad_dtype = DType::kFp32;
  std::string dispatch = "alltoall";
  // Per source rank and expert at most ceil(capacity_factor * T * K / E) rows are sent; the rest
  // are dropped by drop_policy. 0 (JSON null) = dropless.
  double capacity_factor = 0.0;
  std::string drop_policy = "probability";  // "probability" (keep the largest p) | "position"
  int64_t align = 1;  // each local expert's rows padded to a multiple of this for the GEMMs
  int64_t steps = 20;
  int64_t warmup = 3;
  uint64_t seed = 1234;
  CheckMode check = CheckMode::kFirst;
  // Where the reference's dense arithmetic runs: "cpu" (float64 on the host), "gpu" (fp32 on the
  // GPU; cuda backend only) or "auto" (the backend's own device).
  std::string reference = "auto";
  // Measure the GEMM rate and all-to-all bandwidth at start-up, for the report's floors.
  bool roofline = true;
};

// Parses JSON text into a workload. Throws UserError naming the key (unknown keys, wrong types,
// bad enum values) or, for malformed JSON, the line and column.
Workload workload_from_json_text(const std::string& text, const std::string& source_name);
Workload load_workload_file(const std::string& path);

// Applies one "--set a.b.c=value" override, type-checked against the key's type.
void apply_override(Workload& w, const std::string& assignment);

// Resolves mesh "auto" against the world size, then checks every constraint. Throws UserError
// whose message names the key and the fix.
void resolve_and_validate(Workload& w, int world_size);

// Whether the dispatch's send order (rows by destination rank, then by expert) is row for row the
// experts' input order: at ep 1 (one rank) with align 1 (no padding rows). The step then has no
// send-order buffers and no regroup copies (MoeLayer), and the memory estimate counts none.
inline bool send_order_is_expert_major(int64_t ep, int64_t align) { return ep == 1 && align == 1; }

// Bytes one rank needs for the step's buffers (parameters, gradients, activations assuming
// balanced routing) plus the reference path's when check != off. Used to refuse a workload that
// cannot fit before allocating anything.
int64_t estimate_rank_bytes(const Workload& w, int world_size);
// The same with storage_bytes per stored element (4: the CPU backend's floats; 2: bf16 storage).
// The formula is in workload.cpp. A workload whose mesh is still "auto" is resolved on a copy.
int64_t estimate_rank_bytes(const Workload& w, int world_size, int storage_bytes);

// The check's reference: host bytes and (reference on the GPU) device bytes per rank. On the CPU
// it holds every expert in float64; on the GPU, the world's tokens and one expert at a time.
// Host bytes include the backend's results copied to the host for the comparison.
struct ReferenceBytes {
  int64_t host = 0, device = 0;
};
ReferenceBytes estimate_reference_bytes(const Workload& w, int world_size, bool on_gpu);

nlohmann::json workload_to_json(const Workload& w);

}  // namespace moe
