#pragma once
// The independent reference: simple float64 loops over MATH.md, sharing no permutation, all-to-all
// or grouped GEMM with the backends. Weights are regenerated from the seed (core/init.h); this
// rank's x and dout are taken as the backend used them and all-gathered over the world.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/bounded_wait.h"
#include "core/fp8.h"
#include "core/fp8_scales.h"
#include "core/mesh.h"
#include "core/workload.h"

namespace moe {

// Hands over one local expert's finished weight gradients, dw_in [H, 2F] and dw_out [F, H], by
// its global expert id.
using ExpertGradSink =
    std::function<void(int64_t expert, const double* dw_in, const double* dw_out)>;

struct ReferenceInputs {
  const float* x = nullptr;          // [T, H] this rank's tokens, values as stored by the backend
  const float* dout = nullptr;       // [T, H]
  const int32_t* got_idx = nullptr;  // [T, K] the backend's routing: adopted only at near ties
  const uint8_t* got_dropped = nullptr;  // [T, K] the backend's capacity drops: likewise
  // fp8_tensor: the scales this rank's expert GEMMs took, [chunks][kNumFp8Computed][E]
  // (StepOutputs::fp8_scales): likewise; null where the backend reports none.
  const std::vector<float>* got_fp8_scales = nullptr;
  int64_t step = 0;  // for the forced routing of routing.mode
  // The experts whose weight gradients to compute, ascending: the ones this rank holds
  // (expert_placement), or a part of them, maybe none (FSDP ranks hold the same experts and split
  // this work); unset: all of the mesh's [experts_begin, experts_end).
  std::optional<std::vector<int32_t>> experts;
  // Set: those experts' weight gradients go here one expert at a time, in expert order, and
  // ReferenceResult's dw_in and dw_out stay empty. The check compares each as it comes, so that
  // the float64 gradients of all of a rank's experts (90 GB for DeepSeek-V3 at EP 1) are never
  // held at once.
  ExpertGradSink expert_grads;
  // The longest its collectives wait for the other ranks (core/bounded_wait.h).
  double timeout_s = kDefaultWaitBoundS;
};

struct ReferenceResult {
  std::vector<double> out;      // [T, H] this rank's tokens
  std::vector<double> dx;       // [T, H]
  std::vector<double> dw_gate;  // [H, E] summed over the world's tokens
  std::vector<double> dw_in;    // [E_part, H, 2F] the asked experts, over the world's tokens
  std::vector<double> dw_out;   // [E_part, F, H]  (both empty with an ExpertGradSink)
  // The shared experts' gradients [S, H, 2F_sh] and [S, F_sh, H] (empty without them): over the
  // world's tokens from compute_reference, over the own tokens from reference_step.
  std::vector<double> dw_sh_in, dw_sh_out;
  std::vector<int32_t>
      idx;                // [T, K] routing used (the reference's, or the backend's at a near tie)
  std::vector<double> p;  // [T, K]
  std::vector<uint8_t> dropped;  // [T, K] 1 where the capacity dropped the row
  double aux = 0, z = 0;         // global losses
  double loss = 0;               // global sum_t <out, dout> + aux + z
  // Over the world's tokens (identical on every rank): tokens whose expert set differs from the
  // backend's with a clear margin (an error), and at a near tie (allowed, backend's choice used).
  int64_t routing_mismatches = 0;
  int64_t routing_near_ties = 0;
  // Rows whose capacity drop differs from the backend's: with a clear margin in p (an error), or
  // at a near tie in p at the capacity boundary (allowed, the backend's drops used).
  int64_t drop_mismatches = 0;
  int64_t drop_near_ties = 0;
  // fp8_tensor: the per-tensor scales of computed operands the backend reported (nonzero), of
  // them those the reference took at a near tie (core/fp8_scales.h), and how far apart the
  // taken ones were (the largest |got / own - 1|). Over the world, identical on every rank.
  int64_t fp8_scales_reported = 0;
  int64_t fp8_scales_adopted = 0;
  double fp8_scale_adopted_max_rel = 0;
  std::string math;  // ReferenceMath::name() of the math that ran
};

struct ReferenceProblem;
class ReferenceMath;
// Builds the dense arithmetic for a problem whose tokens, routing and capacity are set (the
// weights come from w's seed). The CPU's fills prob's float64 weights; the GPU's (kernels/cuda/
// reference.h) generates them on the device and leaves prob's empty.
using ReferenceMathFactory =
    std::function<std::unique_ptr<ReferenceMath>(const Workload& w, ReferenceProblem& prob)>;
std::unique_ptr<ReferenceMath> cpu_reference_math_from_seed(const Workload& w,
                                                            ReferenceProblem& prob);

ReferenceResult compute_reference(
    const Workload& w, const Mesh& mesh, MPI_Comm world, const ReferenceInputs& in,
    const ReferenceMathFactory& make_math = cpu_reference_math_from_seed);

// ---- The world-free core (what compute_reference runs on every rank), exposed for tests ----

// Everything in float64 for N tokens: the world's tokens in global order and all E experts.
struct ReferenceProblem {
  int64_t tokens = 0;  // N
  ModelShape model;
  RouterConfig router;
  std::vector<double> x, dout;      // [N, H]
  std::vector<double> expert_bias;  // [E]; read only when router.expert_bias
  // The weights, read by the CPU math only (the GPU math generates its own from the seed).
  std::vector<double> w_gate;       // [H, E]
  std::vector<double> w_in;         // [E, H, 2F]
  std::vector<double> w_out;        // [E, F, H]
  std::vector<double> w_sh_in;      // [S, H, 2F_sh] the shared experts (model.shared_experts)
  std::vector<double> w_sh_out;     // [S, F_sh, H]
  std::vector<int32_t> forced_idx;  // [N, K] a forced routing.mode's experts; empty: learned
  // Capacity: each group of `capacity_group` consecutive tokens (one source rank's, or one chunk
  // of them with overlap = pipeline) sends each expert at most `capacity` rows (0: dropless),
  // dropping the lowest p or the later (t, k).
  int64_t capacity = 0, capacity_group = 0;
  bool drop_by_position = false;
  // FP8 expert GEMMs (MATH.md "FP8 expert GEMMs"; none with bf16). Each quantizes its operands
  // whole: one expert's rows in one GEMM of the backend. Token t's routed rows share operands
  // with the rows of the tokens of equal gemm_operand[t] (its EP group's, in its chunk of a
  // pipelined step), in the weight gradients with those of equal wgrad_operand[t] (empty: as
  // gemm_operand; a pipelined step's: its EP group's, all chunks), its shared experts' rows with
  // those of equal shared_operand[t] (its rank's); empty: all tokens one operand. Inside an
  // operand rows go by token, as in every dispatcher's expert-major order (by source rank, then
  // token), which the 128-row blocks of the weight gradients' operands follow.
  Precision precision = Precision::kBf16;
  // dispatch_dtype fp8: the routed experts' x arrives as its 1 x 128 quantization (MATH.md).
  bool dispatch_fp8 = false;
  std::vector<int32_t> gemm_operand, wgrad_operand, shared_operand;  // [N] or empty
  // fp8_tensor: the backend's scales of the routed experts' computed operands by gemm_operand id
  // (empty: none), taken at near ties, which go to *adoptions where set.
  Fp8GotScales got_scales;
  Fp8ScaleAdoptions* adoptions = nullptr;
};

// One pass of the expert FFNs (MATH.md step 7, and with `backward` its gradients) over the rows
// (t, k) of a routing that are not dropped. Every row of an own token [token_begin, token_end)
// gives out [T, H] (+= p * y), dp [T, K] (= <y, dout>) and, backward, dx [T, H] (+= the expert
// path's gradient); every row of a local expert (local(e) >= 0), own token or not, adds to its
// block local(e) of dw_in [E_local, H, 2F] and dw_out [E_local, F, H], or with expert_grads set
// (dw_in and dw_out null) goes to it once per local expert in expert order, zeros for one without
// rows. Null outputs are not computed.
// With local_only, only the local experts' rows are computed: the own tokens' out, dp and dx get
// those experts' parts alone (reference_step's split by expert).
struct ExpertsPass {
  int64_t token_begin = 0, token_end = 0;
  // [E], or empty where no expert is local: each local expert's block, -1 for the others.
  std::vector<int32_t> local_index;
  int64_t local(int64_t e) const { return local_index.empty() ? -1 : local_index[size_t(e)]; }
  bool backward = false;
  bool local_only = false;
  double* out = nullptr;
  double* dp = nullptr;
  double* dx = nullptr;
  double* dw_in = nullptr;
  double* dw_out = nullptr;
  ExpertGradSink expert_grads;
};

// The reference's dense arithmetic, where almost all of its time goes: the router GEMMs and the
// expert FFNs. The routing, capacity, losses and the near-tie logic stay in float64 on the host in
// reference_step whichever math runs; this is the only part that moves to the GPU (in fp32,
// without tensor cores), so that a large workload is checked in seconds.
class ReferenceMath {
 public:
  virtual ~ReferenceMath() = default;
  virtual std::string name() const = 0;
  // [N, E]: logits = x @ w_gate for all N tokens.
  virtual std::vector<double> logits() = 0;
  // idx, p [N, K]; dropped [N, K] or nullptr.
  virtual void experts(const int32_t* idx, const uint8_t* dropped, const double* p,
                       const ExpertsPass& pass) = 0;
  // For tokens [token_begin, token_end) and dlogits [T, E]: dx [T, H] += dlogits @ w_gate^T and
  // dw_gate [H, E] += x^T dlogits.
  virtual void router_backward(int64_t token_begin, int64_t token_end, const double* dlogits,
                               double* dx, double* dw_gate) = 0;
  // The shared experts (MATH.md "Shared experts") for the own tokens of `pass`: every one through
  // every shared expert with weight 1, out [T, H] += y and, backward, dx [T, H] += its gradient and
  // dw_in [S, H, 2F_sh], dw_out [S, F_sh, H] += the own tokens' gradients. Its expert range, dp
  // and expert_grads are not read.
  virtual void shared_experts(const ExpertsPass& pass) = 0;
};

// The float64 loops over prob's own weights (which must be filled), pair by pair.
std::unique_ptr<ReferenceMath> cpu_reference_math(const ReferenceProblem& prob);

// Which of an expert's two weights an FP8 product multiplies: w_in [H, 2F] or w_out [F, H].
enum class ExpertWeight { kIn, kOut };

// What the FP8 expert FFNs multiply with: the dense products and each expert's quantized
// weights. The CPU math's are float64 loops over prob's weights; the GPU reference makes the
// weights from the seed and quantizes them on the device, one expert at a time, where its fp32
// GEMMs read them (hundreds of MB an expert: through the host, they were most of an FP8 check's
// time).
struct Fp8Arithmetic {
  // w_in and w_out of routed expert e, or with `shared` of shared expert e, quantized as
  // fp8_quantize_weight does: the weights of the products below until the next call.
  std::function<void(bool shared, int64_t e, Fp8Recipe recipe)> quantize_weights;
  // C [n, N] = A [n, K] @ W, W the quantized weight `w` [K, N] or, with trans, W [N, K]
  // transposed.
  std::function<std::vector<double>(const std::vector<double>& A, ExpertWeight w, int64_t n,
                                    int64_t K, int64_t N, bool trans)>
      matmul;
  // C [M, N] += A [n, M]^T @ B [n, N].
  std::function<void(const std::vector<double>& A, const std::vector<double>& B, int64_t n,
                     int64_t M, int64_t N, double* C)>
      add_t_times;
};

// ReferenceMath::experts and shared_experts with FP8 precision (MATH.md "FP8 expert GEMMs"): the
// activations' quantization, their bf16 roundings and which rows form one operand on the host, as
// the CPU math does them, around arith's quantized weights and products. The GPU reference's FP8
// path.
void fp8_experts(const ReferenceProblem& prob, const int32_t* idx, const uint8_t* dropped,
                 const double* p, const ExpertsPass& pass, const Fp8Arithmetic& arith);
void fp8_shared_experts(const ReferenceProblem& prob, const ExpertsPass& pass,
                        const Fp8Arithmetic& arith);

// The step for "own" tokens [token_begin, token_end) and "local" experts [expert_begin,
// expert_end). Routing, the near-tie handling against got_idx ([N, K], or nullptr: no comparison),
// the routing counts, aux and z cover all N tokens. out, dx, idx and p are the own tokens'; dw_in
// and dw_out are the local experts', summed over all N tokens. dw_gate, dw_sh_in, dw_sh_out and
// the <out, dout> part of `loss` cover only the own tokens (loss = that part + aux + z): a caller
// that splits the tokens over ranks sums them. With all tokens and experts own, the result is the
// whole step. got_dropped ([N, K] or nullptr) is the backend's capacity drops, adopted only at near
// ties. With expert_grads set, the local experts' dw_in and dw_out go to it (ExpertsPass) and the
// result's stay empty.
ReferenceResult reference_step(const ReferenceProblem& prob, const int32_t* got_idx,
                               const uint8_t* got_dropped, int64_t token_begin, int64_t token_end,
                               int64_t expert_begin, int64_t expert_end);
// Sums, in place, the world's parts of the routed experts' results for all N tokens, out [N, H],
// dp [N, K] and dx [N, H], each rank's from its own experts (compute_reference's all-reduce).
using RoutedSum =
    std::function<void(std::vector<double>& out, std::vector<double>& dp, std::vector<double>& dx)>;

// The same with a given math (reference_step above uses cpu_reference_math(prob)). With
// routed_sum set, the routed experts are split by expert instead of by token: this call computes
// its local experts' rows of all N tokens (local_only), routed_sum adds up the world's, and the
// own tokens' out, dp and dx are taken from the sums; the ranks' local experts must then cover
// every expert once. Each expert's weights are then made and its operands quantized on one rank
// only, where the split by token made every expert's on every rank.
ReferenceResult reference_step(const ReferenceProblem& prob, ReferenceMath& math,
                               const int32_t* got_idx, const uint8_t* got_dropped,
                               int64_t token_begin, int64_t token_end, int64_t expert_begin,
                               int64_t expert_end, const ExpertGradSink& expert_grads = {},
                               const RoutedSum& routed_sum = {});
// The same with the local experts a list of ids, ascending, not a range (expert_placement).
ReferenceResult reference_step(const ReferenceProblem& prob, ReferenceMath& math,
                               const int32_t* got_idx, const uint8_t* got_dropped,
                               int64_t token_begin, int64_t token_end,
                               const std::vector<int32_t>& local_experts,
                               const ExpertGradSink& expert_grads = {},
                               const RoutedSum& routed_sum = {});

// L = sum_t <out[t], dout[t]> + aux + z over all N tokens with the routing held fixed at idx
// [N, K] (the counts c_e come from idx) and the rows in dropped ([N, K] or nullptr) left out. p is
// recomputed from the logits, so finite differences of this function give the gradients
// reference_step computes.
double reference_loss(const ReferenceProblem& prob, const int32_t* idx,
                      const uint8_t* dropped = nullptr);

// ---- The router in float64 (core/reference_router.cpp) ----

// s = softmax(logits) or sigmoid(logits) per router.score; [E].
void reference_scores(const RouterConfig& rc, int64_t E, const double* logits, double* s);

// At a near tie, whether `got` [K] differs from ref.idx only by experts that themselves sit at the
// tie (both those swapped in and those dropped): their q within the near-tie margin of the K-th
// selected q, or (with groups) their group's score within the margin of the Gk-th kept group's.
// Rejects a backend that swaps an unrelated expert just because the token has a close boundary.
struct TokenRouting;
bool reference_near_tie_swap_ok(const RouterConfig& rc, int64_t E, int64_t K, const double* logits,
                                const double* expert_bias, const TokenRouting& ref,
                                const int32_t* got);

struct TokenRouting {
  std::vector<int32_t> idx;  // [K] by descending q, ties lower expert id first
  std::vector<double> p;     // [K] final weights (after normalize and scaling)
  // The K-th and (K+1)-th selectable q (or, with groups, the Gk-th and (Gk+1)-th group scores)
  // are within 1e-3 relative: a backend may legitimately pick another set.
  bool near_tie = false;
};

// MATH.md steps 2-6 for one token. expert_bias [E] or nullptr, used only when router.expert_bias.
TokenRouting reference_route_token(const RouterConfig& rc, int64_t E, int64_t K,
                                   const double* logits, const double* expert_bias);

// Step 6 for a given expert set idx [K]: p [K] from the logits (gather of s, or the softmax of
// the selected logits), normalize_topk and scaling.
void reference_topk_weights(const RouterConfig& rc, int64_t E, int64_t K, const double* logits,
                            const int32_t* idx, double* p);

// dlogits [E] += d/dlogits of sum_k p[k] * dp[k] through step 6 and the score function.
void reference_topk_weights_bwd(const RouterConfig& rc, int64_t E, int64_t K, const double* logits,
                                const int32_t* idx, const double* dp, double* dlogits);

// aux and z over N tokens: logits [N, E], counts [E] = c_e.
void reference_router_losses(const RouterConfig& rc, int64_t N, int64_t E, int64_t K,
                             const double* logits, const double* counts, double* aux, double* z);

// dlogits [E] += the aux and z gradients for one token (counts constant), N the global count.
void reference_router_losses_bwd(const RouterConfig& rc, int64_t N, int64_t E, int64_t K,
                                 const double* logits, const double* counts, double* dlogits);

}  // namespace moe
