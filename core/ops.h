#pragma once
// The compute half of a backend, cut per phase of the step (router, layout, permute, regroup,
// expert FFN, combine, each with its backward) so that a backend may fuse freely inside a phase.
// Memory, copies, lanes and clocks are the Device's (core/device.h); an Ops runs on the lane its
// Device has current. Pointers are the device's memory. "storage" tensors hold the workload dtype
// (bf16 or fp32; the CPU backend stores floats already rounded to it); fp32 and int32 tensors are
// always that.
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/fp8.h"
#include "core/grouped_gemm.h"
#include "core/layout.h"
#include "core/mesh.h"
#include "core/workload.h"

namespace moe {

struct Dims {
  int64_t T = 0, H = 0, F = 0, E = 0, K = 0;  // tokens per rank, hidden, ffn, experts, top-k
  int64_t E_local = 0;                        // experts per EP rank
  int64_t ep = 1, fsdp = 1, world = 1;
  int64_t N = 0;  // global tokens = T * world
  DType dtype = DType::kBf16;
  DType grad_dtype = DType::kFp32;         // expert weight gradients (Workload::expert_grad_dtype)
  Precision precision = Precision::kBf16;  // the expert GEMMs' (Workload::precision)
  // dispatch_dtype fp8: the routed experts' input rows come packed (core/fp8.h fp8_row_bytes: e4m3
  // codes and their 1 x 128 scales, as dispatched), and the up projection multiplies them as they
  // are. Never set for the shared experts, whose rows are the rank's own x.
  bool dispatch_fp8 = false;
  // Rows one source rank may send each expert (0 = dropless) and which rows are dropped beyond
  // it: the lowest p (ties: later (t, k)) or the later (t, k).
  int64_t capacity = 0;
  bool drop_by_position = false;
  int64_t align = 1;  // each local expert's expert-major rows padded to a multiple of this
  // graph: true. The step never waits for the device: the counts stay there, the expert-major
  // buffers hold the most rows any routing gives, and only the device offsets exist.
  bool sync_free = false;
  // The weight gradients take the forward's rows as it saw them (not rows gathered since, as a
  // pipelined step's chunks): a backend may keep what it derives from them for those gradients.
  bool weight_grads_on_fwd_rows = true;
};

// The Dims of one rank's step over all its T tokens, for a workload on a mesh (core/ops.cpp); the
// capacity is already per chunk with overlap pipeline, whose chunks take these with their own T
// and N.
Dims step_dims(const Workload& w, const Mesh& mesh);

// Where each local expert's rows sit in the expert-major buffers: expert l owns rows
// [offsets[l], offsets[l + 1]), l < E_local, padding included. The device copy is always there
// (the dispatcher's layout computes it where the counts are); the host copy only where the step
// brought the counts to the host, never in a sync-free step (graph: true), where a method that
// needs it must refuse.
struct ExpertOffsets {
  const int64_t* device = nullptr;  // [E_local + 1], the backend's memory
  const int64_t* host = nullptr;    // the same on the host, or nullptr
  // At least offsets[E_local] whatever the routing: rows the expert-major buffers hold, so that a
  // kernel can be sized without the counts.
  int64_t rows_bound = 0;
};

// Each EP rank's window memory as this rank addresses it (PeerWindow::peer, at some offset): where
// the nvlink dispatcher's row moves write.
struct RankBases {
  void* at[kMaxWindowRanks] = {};
};

// Per expert GEMM (ExpertGemm order): a method's name, a time in ms.
using ExpertGemmMethods = std::array<std::string, kNumExpertGemms>;
using ExpertGemmMs = std::array<double, kNumExpertGemms>;
// What a set of expert GEMM methods is called: the method's name where all six have the same,
// else kPerGemmMethods; "" where there are none (a backend with one way).
constexpr const char* kPerGemmMethods = "per_gemm";
inline std::string expert_gemm_methods_name(const ExpertGemmMethods& m) {
  for (const std::string& x : m)
    if (x != m[0]) return kPerGemmMethods;
  return m[0];
}

// Host-side GEMM planning so far: plans built, heuristic queries made (the costly part of a new
// shape), and buckets tuned by timing (gemm.algo tuned: a host wait each). The run reports how
// many of each fell in its timed steps.
struct GemmPlanCounts {
  int64_t plans = 0, heuristic_queries = 0, tunings = 0;
};

class Ops {
 public:
  virtual ~Ops() = default;
  virtual std::string name() const = 0;

  // The expert GEMM methods the backend can switch between (empty: one fixed way). The run
  // chooses among them per expert GEMM in its warm-up steps (app/gemm_choice.h).
  virtual std::vector<std::string> expert_gemm_methods() const { return {}; }
  // Each expert GEMM's method from now on (names from expert_gemm_methods()).
  virtual void set_expert_gemm_methods(const ExpertGemmMethods& methods) { (void)methods; }
  // While on, the backend times each expert GEMM of a step on the device (with the SwiGLU kernel
  // next to it, which some methods fuse into the GEMM), summed over the step's calls (chunks, the
  // shared experts); expert_gemm_ms() returns the sums since its last call, once the step's work
  // is done. NaN where the backend does not time them.
  virtual void time_expert_gemms(bool on) { (void)on; }
  virtual ExpertGemmMs expert_gemm_ms() {
    ExpertGemmMs none;
    none.fill(std::numeric_limits<double>::quiet_NaN());
    return none;
  }
  virtual GemmPlanCounts gemm_plan_counts() const { return {}; }  // zeros: plans nothing
  // Start-up calibration, never called in the timed step: the median ms of one dense
  // C [M,N] = A [M,K] @ B [K,N], storage-dtype inputs and output, fp32 accumulation, over `iters`
  // calls after a warm-up call, on the device's clock, through the GEMM path the expert phases
  // use. Allocates its operands and frees them.
  virtual double time_dense_gemm_ms(int64_t M, int64_t N, int64_t K, int iters) = 0;
  // The same for an FP8 GEMM of `recipe` (e4m3 operands scaled as the recipe says, fp32
  // accumulation, storage-dtype output) through the FP8 path the expert phases use: the rate the
  // FP8 phases' roofline floors take. 0 where the backend has none.
  virtual double time_dense_fp8_gemm_ms(int64_t M, int64_t N, int64_t K, Fp8Recipe recipe,
                                        int iters) {
    (void)M, (void)N, (void)K, (void)recipe, (void)iters;
    return 0;
  }

  // Router forward: logits [T,E] fp32, scores [T,E] fp32, idx [T,K] i32, p [T,K] fp32, and the
  // loss partial sums stats [2E+1] fp32 (see kernels/cpu/router.h). x [T,H], w_gate [H,E] storage;
  // expert_bias [E] fp32 or nullptr; forced_idx [T,K] i32 or nullptr (a forced routing.mode).
  virtual void router_fwd(const Dims& d, const RouterConfig& cfg, const void* x, const void* w_gate,
                          const float* expert_bias, const int32_t* forced_idx, float* logits,
                          float* scores, int32_t* idx, float* p, float* stats) = 0;
  // Router backward and the end of dx: dlogits [T,E] from dp [T,K] and the world's counts
  // global_stats [2E+1]; dx [T,H] storage = dx_acc [T,H] fp32 + dlogits @ w_gate^T;
  // dw_gate [H,E] fp32 = x^T dlogits (this rank's part).
  virtual void router_bwd(const Dims& d, const RouterConfig& cfg, const void* x, const void* w_gate,
                          const float* logits, const float* scores, const int32_t* idx,
                          const float* dp, const float* global_stats, float* dlogits, float* dx_acc,
                          void* dx, float* dw_gate) = 0;
  // slots [T*K] i32 = slot_of[idx]: the routed rows' experts as expert_placement placed them
  // (core/placement.h), which the dispatchers take for expert ids; slot_of [E] i32.
  virtual void experts_to_slots(const Dims& d, const int32_t* idx, const int32_t* slot_of,
                                int32_t* slots) = 0;
  // expert_counts [E] i32 (rows sent) and send_pos [T*K] i32, -1 for a row dropped by the
  // capacity d.capacity (kernels/cpu/layout.h); p [T,K] fp32 ranks rows for dropping.
  virtual void dispatch_layout(const Dims& d, const int32_t* idx, const float* p,
                               int32_t* expert_counts, int32_t* send_pos) = 0;
  // The all-gather dispatcher's layout: pos [ep*T*K] i32, where each routed row of the EP
  // group's d.ep source ranks (d.T tokens each) sits in this rank's expert-major buffer; -1 where
  // it goes to another rank's experts or was dropped. send_pos [ep*T*K] i32: each source's send
  // positions (dispatch_layout's), one source after another; starts [ep, E_local + 1] i32: where
  // this rank's local expert l's rows begin in source s's send order ([s, E_local]: where this
  // rank's rows end); dest [ep, E_local] i32: where block (s, l) begins in expert-major order.
  virtual void expert_major_positions(const Dims& d, const int32_t* send_pos, const int32_t* starts,
                                      const int32_t* dest, int32_t* pos) = 0;
  // The deduplicated dispatcher's send plan (dispatch/alltoall_dedup.h): one wire row per
  // (token, EP rank) that takes at least one of the token's kept rows, by rank, then token. From
  // idx [T,K] i32, p [T,K] fp32 and dispatch_layout's expert_counts [E] i32 and send_pos [T*K]
  // i32: wire_pos [T, ep] i32 (the wire row of (t, r), -1 where none), wire_counts [ep] i32, and
  // for each wire row its K slots [W, K] i32 and weights [W, K] fp32 (kernels/cpu/layout.h).
  virtual void dedup_layout(const Dims& d, const int32_t* idx, const float* p,
                            const int32_t* expert_counts, const int32_t* send_pos,
                            int32_t* wire_pos, int32_t* wire_counts, int32_t* slots,
                            float* weights) = 0;
  // offsets [E_local + 1] i64 (ExpertOffsets::device): each local expert's rows, the sum over the
  // d.ep sources s of counts[s * stride + l], padded to a multiple of d.align, one expert after
  // another (core/layout.h expert_major_offsets).
  virtual void expert_offsets(const Dims& d, const int32_t* counts, int64_t stride,
                              int64_t* offsets) = 0;
  // The expert-major blocks of a dispatcher that places rows itself, on the device: table
  // [expert_block_table_entries] i32 and offsets [E_local + 1] i64 from the d.ep sources' counts
  // at counts[s * stride + first + l] (core/layout.h expert_block_table).
  virtual void expert_blocks(const Dims& d, const int32_t* counts, int64_t stride, int64_t first,
                             int32_t* table, int64_t* offsets) = 0;
  // Zeros each local expert's padding rows of expert_major [., H] storage: [offsets[l] + rows[l],
  // offsets[l + 1]), rows [E_local] i32 (the table's last part).
  virtual void zero_expert_padding(const Dims& d, const int32_t* rows, const int64_t* offsets,
                                   void* expert_major) = 0;
  // A pipelined step's weight gradients take each local expert's rows of all its chunks in one
  // GEMM, ordered and padded as the unchunked step's (MoeLayer::experts_bwd_weights): offsets
  // [E_local + 1] i64 and blocks [3, merged_chunk_blocks] i64 of core/layout.h
  // merged_chunk_layout, computed on the device from the chunks' counts and offsets there.
  virtual void merge_chunk_layout(const Dims& d, const std::vector<ChunkRows>& chunks,
                                  int64_t* offsets, int64_t* blocks) = 0;
  // dst [offsets[E_local], row_bytes] = src's rows [., row_bytes] where merge_chunk_layout's
  // blocks for `chunks` chunks put them, each expert's padding rows zeros; rows_bound >=
  // offsets[E_local] whatever the counts (the kernels are sized without them).
  virtual void gather_chunk_rows(const Dims& d, int64_t chunks, const int64_t* offsets,
                                 const int64_t* blocks, int64_t rows_bound, const void* src,
                                 size_t row_bytes, void* dst) = 0;
  // The nvlink dispatcher's row moves into the EP ranks' windows (dispatch/nvlink.h). Row t of
  // src [d.T, row_bytes] to every EP rank r whose wire_pos [d.T, d.ep] entry (dedup_layout's) is
  // >= 0, at row first_row + t of to.at[r].
  virtual void rows_to_ranks(const Dims& d, const void* src, size_t row_bytes,
                             const int32_t* wire_pos, int64_t first_row, const RankBases& to) = 0;
  // And back: row s * d.T + t of src [d.ep * d.T, row_bytes] (the EP group's tokens, source by
  // source) to source rank s, at row wire_pos_all[(s * d.T + t) * d.ep + me] of to.at[s] where
  // that is >= 0: the source's wire row of (t, this rank), which exists exactly where this rank
  // holds some of t's kept rows.
  virtual void rows_to_sources(const Dims& d, const void* src, size_t row_bytes,
                               const int32_t* wire_pos_all, int64_t me, const RankBases& to) = 0;
  // dispatch_dtype fp8 (Dims::dispatch_fp8): x [n, H] storage -> packed [n, fp8_row_bytes(d.H)]
  // (core/fp8.h fp8_pack_rows), each token's row quantized once on its rank, before a dispatcher
  // moves it.
  virtual void pack_fp8_rows(const Dims& d, const void* x, int64_t n, void* packed) = 0;
  // send [sum(expert_counts), H] storage: rows of x [T,H] in send order; dropped rows are not sent.
  virtual void permute(const Dims& d, const void* x, const int32_t* send_pos, void* send) = 0;
  // Source-rank-major <-> expert-major rows, [R, H] storage; counts [ep, E_local] i32 (backend
  // memory); rows_bound >= R whatever the counts (the kernels are sized without them).
  // Expert-major blocks are padded to multiples of d.align rows; the padding rows are written as
  // zeros when going to expert-major.
  virtual void regroup(const Dims& d, const void* src, const int32_t* counts, int64_t rows_bound,
                       bool to_expert_major, void* dst) = 0;
  // The weights of G experts' FFNs, w_in [G, H, 2F] and w_out [G, F, H] storage (d.H, d.F), as
  // the step's FFN calls will read them (gathered): called once per step for each set of expert
  // weights, before the first FFN call on any of its experts. A backend that multiplies by
  // another form of the weights makes it here, once per step as training does after each
  // optimizer step: the CUDA backend's FP8 codes, both ways round, whose FFN calls then refuse
  // weights it did not prepare. Does nothing by default.
  virtual void prepare_expert_weights(const Dims& d, int64_t G, const void* w_in,
                                      const void* w_out) {
    (void)d, (void)G, (void)w_in, (void)w_out;
  }
  // Whether prepare_expert_weights makes anything for steps of d (fp8_weights cached then has
  // something to keep and to time; a backend that quantizes inside each GEMM has not).
  virtual bool prepares_expert_weights(const Dims& d) const {
    (void)d;
    return false;
  }
  // fp8_tensor: where the next expert FFN calls report the per-tensor scales they quantize a
  // (expert_ffn_fwd), dy and dh (expert_ffn_bwd_data) with, [kNumFp8Computed][d.E_local] fp32
  // in this backend's memory (core/fp8_scales.h); null: not reported (the shared experts'
  // calls). The check takes them at near ties.
  virtual void report_fp8_scales(float* scales) = 0;
  // Expert FFN over expert-major rows at `offsets`. See kernels/cpu/expert_ffn.h. With
  // d.dispatch_fp8, xe (here and in expert_ffn_bwd_weights) holds the packed FP8 rows as
  // dispatched: the up projection multiplies their codes and scales as they are; w_in's gradient
  // takes their values rounded to bf16, as the step would store them (docs/layer.md).
  virtual void expert_ffn_fwd(const Dims& d, const void* xe, const void* w_in, const void* w_out,
                              const ExpertOffsets& offsets, void* h, void* a, void* ye) = 0;
  // Its backward in two halves, so that the all-to-all of dxe may run beside the weight
  // gradients: the data gradients (da, dh scratch; dxe), then the weight gradients dw_in, dw_out
  // (d.grad_dtype; reads dh from the first half), overwritten.
  virtual void expert_ffn_bwd_data(const Dims& d, const void* dye, const void* h, const void* w_in,
                                   const void* w_out, const ExpertOffsets& offsets, void* da,
                                   void* dh, void* dxe) = 0;
  virtual void expert_ffn_bwd_weights(const Dims& d, const void* dye, const void* xe, const void* a,
                                      const void* dh, const ExpertOffsets& offsets, void* dw_in,
                                      void* dw_out) = 0;
  // out [T,H] storage = sum_k p * y_send rows (kernels/cpu/combine.h), and its backward; rows with
  // send_pos -1 (dropped) add nothing and get dp = 0.
  virtual void combine_fwd(const Dims& d, const void* y_send, const int32_t* send_pos,
                           const float* p, void* out) = 0;
  // combine_fwd's sums as they are before the storage rounding, out [T,H] fp32: one EP rank's
  // partial sums, which the all-gather dispatcher's reduce-scatter adds up.
  virtual void combine_fwd_f32(const Dims& d, const void* y_send, const int32_t* send_pos,
                               const float* p, float* out) = 0;
  // dst [n] storage = src [n] fp32 rounded to d.dtype.
  virtual void to_storage(const Dims& d, const float* src, int64_t n, void* dst) = 0;
  virtual void combine_bwd(const Dims& d, const void* dout, const void* y_send,
                           const int32_t* send_pos, const float* p, void* dy_send, float* dp) = 0;
  // dx_acc [T,H] fp32 = sum over the K returned rows of dx_send [T*K, H] storage.
  virtual void unpermute_sum(const Dims& d, const void* dx_send, const int32_t* send_pos,
                             float* dx_acc) = 0;
  // dst [T,H] storage = the fp32 sum over the K rows of src [., H] storage at send_pos (-1
  // skipped), rounded once: unpermute_sum's sums stored in the storage dtype.
  virtual void unpermute_sum_storage(const Dims& d, const void* src, const int32_t* send_pos,
                                     void* dst) = 0;
  // The shared experts' part of a token's sums (kernels/cpu/shared_sum.h), rows [S, T, H]
  // storage, one shared expert after another: out [T,H] storage = out + sum_s y_sh[s] (fp32 sum
  // of the stored values, rounded once), and dx_acc [T,H] fp32 += sum_s dx_sh[s].
  virtual void shared_sum_out(const Dims& d, int64_t S, const void* y_sh, void* out) = 0;
  virtual void shared_sum_dx(const Dims& d, int64_t S, const void* dx_sh, float* dx_acc) = 0;
};

}  // namespace moe
