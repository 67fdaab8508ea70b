#pragma once
// One MoE layer training step over a backend {Device, Ops, Comm} and a Dispatcher: FSDP gather,
// router, dispatch, expert FFN, combine, and the whole backward with the gradient reductions.
// Reading run_step() top to bottom follows the step; each phase is one Ops, Dispatcher or
// collective call, timed on its own.
//
// The rank's tokens go through dispatch, experts and combine (and back) in chunks, each with its
// own Dispatcher over T / C tokens: one chunk of all T, or with overlap = pipeline C equal ones,
// software-pipelined on the device's two lanes. The router runs once over all T tokens before
// them, and its backward once after them.
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "comm/comm.h"
#include "core/buffer_plan.h"
#include "core/device.h"
#include "core/dispatcher.h"
#include "core/lane_times.h"
#include "core/mesh.h"
#include "core/ops.h"
#include "core/placement.h"
#include "core/reference.h"
#include "core/shared_experts.h"
#include "core/workload.h"

namespace moe {

// Timed phases. The first kNumStepPhases partition the step; the a2a and counts phases are parts
// of layout/dispatch/combine, timed separately for bandwidth.
enum Phase : int {
  kFsdpGather,
  kRouterFwd,
  kLayout,
  kSharedFwd,
  kDispatchFwd,
  kExpertsFwd,
  kCombineFwd,
  kCombineBwd,
  kExpertsBwd,
  kSharedBwd,
  kDispatchBwd,
  kRouterBwd,
  kGradSync,
  kNumStepPhases,
  kCountsExchange = kNumStepPhases,
  kA2aDispatchFwd,
  kA2aCombineFwd,
  kA2aCombineBwd,
  kA2aDispatchBwd,
  kStep,
  kNumPhases
};
const char* phase_name(int phase);

// Host copies of everything a check or dump needs, taken after a step (untimed).
struct StepOutputs {
  std::vector<float> x, dout, out, dx;  // [T, H]
  std::vector<int32_t> idx;             // [T, K]
  std::vector<uint8_t> dropped;         // [T, K] 1 where the capacity dropped the row
  std::vector<float> p;                 // [T, K]
  std::vector<float> w_gate, dw_gate;   // [H, E]; dw_gate after the world all-reduce
  std::vector<float> expert_bias;       // [E] (empty unless router.expert_bias)
  std::vector<int32_t> experts;         // the experts this rank holds, slot by slot (placement)
  std::vector<float> w_in, w_out;       // this rank's experts' full weights, as used (when wanted)
  // Gradients over the world's tokens of every local expert (when wanted).
  std::vector<float> dw_in, dw_out;
  // The shared experts' full weights as used (when wanted) and their full gradients over the
  // world's tokens, [S, H, 2F_sh] and [S, F_sh, H]; empty without shared experts.
  std::vector<float> w_sh_in, w_sh_out, dw_sh_in, dw_sh_out;
  double aux = 0, z = 0;  // global
  double loss = 0;        // global sum <out, dout> + aux + z: set by the caller (a host reduction)
  // fp8_tensor: the scales this rank's expert GEMMs quantized a, dy and dh with, by chunk, kind
  // and global expert [chunks][kNumFp8Computed][E], 0 for the experts it does not hold or where
  // the backend reports none (Ops::report_fp8_scales); empty otherwise.
  std::vector<float> fp8_scales;
};

// The reference's inputs from a step's host copies: the tokens and dout as the backend used them,
// its routing and drops (adopted at near ties only), and the step's forced routing. The caller
// sets the experts to check and the wait bound.
ReferenceInputs reference_inputs(const StepOutputs& o, int64_t step);

// What download_outputs copies of the experts, whose weights and gradients are most of the bytes
// (DeepSeek-V3 at EP 1: 45 GB of each as floats): the weights only for a dump (the check makes its
// own), the gradients of every local expert likewise (the check reads them one expert at a time:
// MoeLayer::download_expert_grads). The shared experts' gradients come whole (a small part of the
// bytes), their weights with the experts'.
struct OutputsWanted {
  bool expert_weights = true;
  bool expert_grads = true;
};

class MoeLayer {
 public:
  MoeLayer(const Workload& w, const Mesh& mesh, Device& device, Ops& ops, Comm& comm);
  ~MoeLayer();
  MoeLayer(const MoeLayer&) = delete;
  MoeLayer& operator=(const MoeLayer&) = delete;

  const Dims& dims() const { return d_; }
  // Draws this step's x and dout from the seed and uploads them (untimed).
  void load_step_inputs(int64_t step);
  // Forward + backward of one step; phase times (ms, this rank) in `phase_ms` [kNumPhases].
  void run_step(std::vector<double>& phase_ms);
  // graph: true. The next run_step is captured into a graph as it runs, and every later one
  // replays it; on a device that cannot capture (the CPU) they all run as issued.
  void capture_next_step() { capture_next_ = true; }
  // Whether run_step replays a captured graph.
  bool replaying() const { return replaying_; }
  // fp8_weights cached: the median ms, over `reps` runs timed alone (device synced around each),
  // of quantizing the weights as a step does (routed and shared experts), which the timed steps
  // leave out; -1 where the backend keeps no quantized weights (Ops::prepares_expert_weights).
  // Call after a step has gathered the weights.
  double time_weight_quantization(int reps);
  // The host's side of the last step: ms from its start until all of its work was issued (the
  // launch overhead a graph removes), and how often it waited for the device in that time.
  double host_issue_ms() const { return host_issue_ms_; }
  int64_t host_waits() const { return host_waits_; }
  // The last step's rows through the dispatchers (every chunk's), and [E] c_e over the world's
  // tokens.
  StepTraffic traffic();
  const std::vector<float>& global_expert_counts() const { return global_expert_counts_; }
  // What each lane did in the last step (this rank): busy time, and the dispatchers' collectives
  // (the a2a_* phases) and how much of them no other lane's work hid.
  const LaneTimes& lanes() const { return lanes_; }
  // Downloads the last step's tensors; gathers FSDP gradient shards back (collective, untimed).
  StepOutputs download_outputs(const OutputsWanted& want = {});
  // Local slot `slot`'s gradients of the last step as floats, dw_in [H, 2F] and dw_out [F, H],
  // after download_outputs has gathered them: the check compares them an expert at a time, so that
  // the host never holds all of them (45 GB at DeepSeek-V3's EP 1).
  void download_expert_grads(int64_t slot, std::vector<float>& dw_in, std::vector<float>& dw_out);
  // Where the experts are (expert_placement): the placement and the first step's rows per EP rank
  // it was made from; this EP rank's experts, slot by slot (ascending), and one's local slot.
  const PlacedExperts& placement() const { return placed_; }
  const std::vector<int32_t>& local_experts() const { return local_experts_; }
  int64_t local_slot(int64_t expert) const;
  // Digests (core/digest.h) of the last step's results, computed where they live, without a
  // download: out, dx, dw_gate, idx, and this rank's FSDP shards of dw_in and dw_out (every
  // gradient element is then counted on exactly one rank of its EP group); with shared experts
  // also this rank's shards of dw_sh_in and dw_sh_out.
  std::vector<std::pair<std::string, uint64_t>> digest_outputs();

 private:
  // Local experts [first, first + count)'s gradients as floats (download_expert_grads,
  // download_outputs).
  void download_expert_grad_range(int64_t first, int64_t count, std::vector<float>& dw_in,
                                  std::vector<float>& dw_out);
  // One chunk of the rank's tokens: its dispatcher, where its tokens sit in the per-token tensors
  // and where its rows sit in the expert-major buffers.
  struct Chunk {
    std::unique_ptr<Dispatcher> dispatcher;
    int64_t index = 0;
    int64_t token_begin = 0;  // its first token
    int64_t tokens = 0;       // T / step_chunks
    int64_t row_begin = 0;    // its first expert-major row (set by layout())
  };
  // A software pipeline over the chunks: feed and drain on the side lane, work on the main lane.
  // work(c) runs beside drain(c - 1) and feed(c + 1); at_start runs on the main lane beside
  // feed(0), at_end beside the last drain.
  using Stage = void (MoeLayer::*)(const Chunk&);
  struct Pipeline {
    Stage feed, work, drain;
    void (MoeLayer::*at_start)() = nullptr;
    void (MoeLayer::*at_end)() = nullptr;
  };
  void pipeline(const Pipeline& p);
  template <class Fn>
  void on_side(Fn fn) {
    device_.fork_side();
    fn();
    device_.to_main();
  }

  void place_experts_by_first_step();  // sets placed_ and local_experts_
  void issue_step();                   // every phase of a step, issued as run_step times it
  void fsdp_gather();
  void route();
  void layout();
  void forward();
  void backward();
  // One chunk's phases, each timed as its phase (a pipelined step's chunks add up there).
  void dispatch_fwd(const Chunk& c);
  void experts_fwd(const Chunk& c);
  void combine_fwd(const Chunk& c);
  void combine_bwd(const Chunk& c);
  void experts_bwd_data(const Chunk& c);
  void dispatch_bwd(const Chunk& c);
  // The weight gradients, once over every chunk's rows (merge_chunks()).
  void experts_bwd_weights();
  void experts_bwd_weights_and_shared();
  void shared_fwd();
  void shared_bwd();
  void grad_sync();
  // Chunk c's part of a per-token tensor of `per_token` elements of `bytes` each, and of an
  // expert-major buffer of `row_bytes` rows.
  template <class T>
  T* tokens_of(T* base, const Chunk& c, int64_t per_token, size_t bytes = sizeof(T)) const {
    using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
    return reinterpret_cast<T*>(reinterpret_cast<Byte*>(base) +
                                size_t(c.token_begin * per_token) * bytes);
  }
  void* rows_of(const GrownBuffer& b, const Chunk& c, int64_t row_bytes) const {
    return static_cast<char*>(b.ptr()) + c.row_begin * row_bytes;
  }
  // With chunks: where each chunk's rows go in the unchunked step's layout, after the layouts.
  void merge_chunks(int64_t rows_bound);
  ExpertOffsets merged_offsets() const;
  void grow_expert_buffers_for(int64_t rows);
  void* grow(GrownBuffer& b, size_t bytes);
  void* fixed(size_t bytes);

  Workload w_;
  Mesh mesh_;
  Device& device_;
  Ops& ops_;
  Comm& comm_;
  Dims d_;
  BufferPlan plan_;
  std::unique_ptr<PhaseTimer> timer_;
  std::vector<Chunk> chunks_;
  bool pipelined_ = false;  // overlap = pipeline
  // More than one chunk: the weight gradients gather the chunks' rows into the unchunked step's
  // layout (offsets and blocks on the device, core/layout.h merged_chunk_layout; the offsets on
  // the host too unless sync-free) and run once over them.
  bool merged_ = false;
  int64_t* merged_offsets_ = nullptr;
  int64_t* merged_blocks_ = nullptr;
  std::vector<int64_t> merged_offsets_host_;
  int64_t merged_rows_bound_ = 0;
  bool capture_next_ = false, replaying_ = false;
  // fp8_weights: whether this step quantizes the weights (per_step: every step; cached: the
  // first), and whether any step has.
  bool quantize_weights_ = true, weights_quantized_ = false;
  double host_issue_ms_ = 0;
  int64_t host_waits_ = 0;
  std::unique_ptr<SharedExperts> shared_;  // null without shared experts
  LaneTimes lanes_;
  std::vector<void*> owned_;

  // Parameters and their gradients.
  void* w_gate_ = nullptr;        // [H, E] storage
  float* expert_bias_ = nullptr;  // [E] fp32 (nullptr unless enabled)
  void* w_in_shard_ = nullptr;    // [shard_in_] storage: this rank's FSDP shard
  void* w_out_shard_ = nullptr;   // [shard_out_]
  void* w_in_full_ = nullptr;     // [E_local, H, 2F] (+ padding) gathered
  void* w_out_full_ = nullptr;    // [E_local, F, H] (+ padding)
  float* dw_gate_ = nullptr;      // [H, E] fp32
  void* dw_in_full_ = nullptr;    // [fsdp * shard_in_] grad dtype (Dims::grad_dtype)
  void* dw_out_full_ = nullptr;
  void* dw_in_shard_ = nullptr;  // [shard_in_] after the reduce-scatter
  void* dw_out_shard_ = nullptr;
  int64_t shard_in_ = 0, shard_out_ = 0;  // elements per FSDP shard (padded)

  // Per-token tensors.
  void *x_ = nullptr, *dout_ = nullptr, *out_ = nullptr, *dx_ = nullptr;  // [T, H] storage
  void* xq_ = nullptr;       // dispatch_dtype fp8: x packed, [T, fp8_row_bytes(H)]
  float* dx_acc_ = nullptr;  // [T, H] fp32
  float *logits_ = nullptr, *scores_ = nullptr, *dlogits_ = nullptr;  // [T, E] fp32
  int32_t* idx_ = nullptr;                                            // [T, K]
  int32_t* forced_idx_ = nullptr;       // [T, K] this step's forced routing (nullptr: learned)
  float *p_ = nullptr, *dp_ = nullptr;  // [T, K] fp32
  float* stats_ = nullptr;              // [2E + 1] fp32

  // Expert-major rows, ragged (the chunks' dispatchers' rows(), one chunk after another):
  // inputs, activations and their grads.
  // xe_ holds packed FP8 rows with dispatch_dtype fp8 (BufferPlan::row_xe); xw_ (merged_ only)
  // the chunks' xe rows gathered for the weight gradients.
  GrownBuffer xe_{device_}, h_{device_}, a_{device_}, ye_{device_}, dye_{device_}, da_{device_},
      dh_{device_}, dxe_{device_}, xw_{device_};

  std::vector<float> stats_host_, global_expert_counts_;
  // fp8_tensor: the scales the backend reports for each chunk's routed expert GEMMs,
  // [chunks][kNumFp8Computed][E_local] in its memory (Ops::report_fp8_scales); null otherwise.
  float* fp8_scales_ = nullptr;
  void report_fp8_scales_of(const Chunk* c);

  // Where the experts are: the placement, this EP rank's experts by slot; where it moves experts,
  // each expert's slot on the device [E] and the routed rows' slots [T, K], which the
  // dispatchers take in place of idx_.
  PlacedExperts placed_;
  std::vector<int32_t> local_experts_;
  int32_t* slot_of_expert_ = nullptr;
  int32_t* slot_idx_ = nullptr;
};

}  // namespace moe
