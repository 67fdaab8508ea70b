#pragma once
// The expert GEMMs of the CUDA backend: the CUDA twin of moe::cpu::gemm (kernels/cpu/gemm.h), same
// row-major semantics, bf16 or fp32 inputs, fp32 accumulation, bf16 or fp32 output.
//
// One GEMM goes through cuBLASLt with a cached plan (descriptors, layouts, algorithm) per shape, so
// a steady-state step makes no heuristic queries and no allocations. The per-expert GEMMs of one
// phase go through grouped(): either a loop of cuBLASLt calls spread over side streams (fork-join,
// as TransformerEngine's multi_stream_cublas_gemm) or one cublasGemmGroupedBatchedEx call.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/grouped_gemm.h"
#include "core/workload.h"
#include "kernels/cuda/gemm_clock.h"
#include "kernels/cuda/grouped_gemm.h"

namespace moe::cuda {

// One GEMM of a group: C [M, N] = op(A) @ op(B), shapes and storage as in GemmRunner::gemm.
struct GemmProblem {
  int64_t M = 0, N = 0, K = 0;
  const void* A = nullptr;
  const void* B = nullptr;
  void* C = nullptr;
};

// How an FP8 GEMM's two operands are scaled (results/2026-11-25-fp8-cublaslt-probe: the pairs
// cuBLASLt runs on Hopper). Per tensor: one fp32 scale each. kRowsTimesTiles: A in 1 x 128 blocks
// along K (scales [ceil(K / 128), M], an A row's blocks M apart), B in 128 x 128 tiles (scales
// row-major over B's [ceil(N / 128), ceil(K / 128)] tiles). kRowsTimesRows: both in 1 x 128
// blocks along K, B's scales [ceil(K / 128), N].
enum class Fp8Scaling : uint8_t { kTensor = 1, kRowsTimesTiles, kRowsTimesRows };

// One FP8 operand: e4m3 codes K-major (row i's K codes at codes + i * ld) and their scales.
struct Fp8Operand {
  const uint8_t* codes = nullptr;
  int64_t ld = 0;
  const float* scales = nullptr;
};

// One FP8 GEMM of a group: C [M, N] (ldc N) = A [M, K] @ B [N, K]^T.
struct Fp8Problem {
  int64_t M = 0, N = 0, K = 0;
  Fp8Operand A, B;
  void* C = nullptr;
};

enum class GemmMethod {
  kLtMultiStream,   // one cublasLtMatmul per problem, spread over the runner's side streams
  kGroupedBatched,  // one cublasGemmGroupedBatchedEx call (falls back to the above, see .cu)
  kGroupedSm90,     // kernels/cuda/grouped_gemm.h, one launch for all experts (falls back too)
};
const char* gemm_method_name(GemmMethod m);
// The method of that name; false where none has it.
bool gemm_method_from_name(const std::string& name, GemmMethod* m);

enum class AlgoPolicy { kAuto, kBucket, kExact, kTuned };
// The policy of a workload's gemm.algo.
AlgoPolicy algo_policy_of(GemmAlgo algo);

// Whether `policy` takes a GEMM's algorithm from its bucket rather than its own query: kAuto does
// below 2^35 FLOPs (about 50 us at 700 TFLOP/s, comparable to a query's host time); kBucket and
// kTuned always.
bool gemm_algo_by_bucket(AlgoPolicy policy, int64_t M, int64_t N, int64_t K);

// The bucket of a row-dependent GEMM size: multiples of 16 up to 64, then 8 buckets per doubling
// (above 64 a bucket is less than a quarter wider than any size it takes).
int64_t gemm_algo_bucket(int64_t x);

// Owns the cuBLASLt and cuBLAS handles, the side streams, their events and workspaces. Not thread
// safe; meant for one caller stream at a time (gemm() and the grouped-batched path share one
// workspace, which is safe because their work is ordered on that stream).
class GemmRunner {
 public:
  explicit GemmRunner(int num_streams = 4, size_t workspace_bytes_per_stream = size_t(32) << 20);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // C [M, N] = op(A) @ op(B) (+ C when accumulate), row-major; op(A) is [M, K] (A stored [M, K],
  // or [K, M] when trans_a), op(B) is [K, N] (B stored [K, N], or [N, K] when trans_b). A and B
  // are `in` (bf16 or fp32), C is `out`; the sum is fp32 and rounded once to `out`. Supported
  // (in, out): (bf16, bf16), (bf16, fp32), (fp32, fp32); fp32 inputs use no TF32. K == 0 gives
  // zeros (or C unchanged when accumulate); M == 0 or N == 0 does nothing. Runs on `stream`.
  void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const void* A,
            const void* B, void* C, bool accumulate, DType in, DType out, cudaStream_t stream);

  // Independent FP8 GEMMs (Fp8Problem: one per expert; C regions must not overlap) on cuBLASLt's
  // FP8 matmul, both operands K-major (Hopper's FP8 kernels take only that), fp32 accumulation,
  // C `out` rounded once (+ C with accumulate, fp32 only; K == 0 gives zeros or C unchanged).
  // Spread over the side streams as grouped() spreads the per-expert loop, ordered after prior
  // work on `stream` and before later work there; the scales are read when the GEMMs run.
  // Operands must be 16-byte aligned (the plans assume no more, so that experts at any row
  // offset share them).
  void grouped_fp8(const std::vector<Fp8Problem>& problems, Fp8Scaling scaling, bool accumulate,
                   DType out, cudaStream_t stream);

  // Independent GEMMs with the same transposes and dtypes (one per expert; sizes may differ, C
  // regions must not overlap), by the current method. Ordered after prior work on `stream`, and
  // later work on `stream` sees all results.
  void grouped(bool trans_a, bool trans_b, const std::vector<GemmProblem>& problems,
               bool accumulate, DType in, DType out, cudaStream_t stream);

  // One expert GEMM of all groups on the grouped sm90 kernel, when the method is kGroupedSm90 and
  // the kernel takes the shape; false (nothing done) otherwise, and then the caller runs the
  // per-expert list through grouped(). With a fused epilogue (GroupedEpilogue; aux its extra
  // operand), false also where the fused kernel does not take the shape: the caller then runs the
  // GEMM and the separate SwiGLU kernel. The first fallback of each reason is logged.
  bool grouped_sm90(const GroupedGemmShape& s, const int64_t* offsets_dev, const void* A,
                    const void* B, void* C, DType in, DType out, cudaStream_t stream,
                    GroupedEpilogue epi = GroupedEpilogue::kStore, void* aux = nullptr);

  // An FP8 expert GEMM of all groups on the grouped sm90 kernel (GroupedGemm::run_fp8: e4m3
  // codes, either recipe's scales), under grouped_sm90()'s conditions; false (nothing done)
  // otherwise, and then the caller runs its cuBLASLt FP8 GEMMs.
  bool grouped_sm90_fp8(const GroupedGemmShape& s, const int64_t* offsets_dev, const void* A,
                        const void* B, const GroupedFp8Scales& scales, void* C, DType out,
                        cudaStream_t stream, GroupedEpilogue epi = GroupedEpilogue::kStore,
                        void* aux = nullptr);

  // Every expert GEMM's method, or one's; method() is the one the calls above use now: the one
  // set for all, or the GEMM's where an ExpertGemmScope selected it.
  void set_method(GemmMethod m) {
    methods_.fill(m);
    method_ = m;
  }
  void set_method(ExpertGemm g, GemmMethod m) { methods_[size_t(g)] = m; }
  GemmMethod method(ExpertGemm g) const { return methods_[size_t(g)]; }
  // The grouped sm90 kernel's schedule (GroupedGemm::set_schedule).
  void set_sm90_schedule(const GroupedSchedule& s);
  // Whether grouped_sm90() takes fused epilogues (gemm.sm90_fuse_swiglu); when not, it answers
  // false for them, and the caller runs the plain GEMM and the separate SwiGLU kernel.
  void set_sm90_fuse_swiglu(bool on) { sm90_fuse_swiglu_ = on; }
  GemmMethod method() const { return method_; }
  // Device time per expert GEMM (ExpertGemmScope records into it while it is on).
  ExpertGemmClock& clock() { return clock_; }

  // Number of cached cuBLASLt plans (for tests: a repeated shape must not add one).
  size_t num_cached_plans() const { return plans_.size(); }
  // cuBLASLt heuristic queries so far: the host cost of a new shape (tens of microseconds each,
  // against about one for a cached plan).
  int64_t num_heuristic_queries() const { return heuristic_queries_; }
  // Buckets whose algorithm kTuned chose by timing so far (each a host wait).
  int64_t num_tunings() const { return tunings_; }

  // Expert GEMMs see new row counts every step (M in the forward and dgrad, K in the wgrad), and
  // a heuristic query per new shape is host time inside the step. kBucket chooses the algorithm
  // once per bucket of M and K (gemm_algo_bucket) for the bucket's largest shape; a new shape in
  // the bucket only builds its layouts and checks that the algorithm runs it
  // (cublasLtMatmulAlgoCheck), falling back to its own query if not. kExact queries every shape.
  // kAuto (the default) buckets only GEMMs too small to hide a query behind their GPU time
  // (gemm_algo_by_bucket): measured on H200s, bucketing made DeepSeek-V3's many small expert
  // GEMMs 13-25% faster at EP 2 but Mixtral's large ones 5% slower. The choice depends on the
  // shape alone, so results stay reproducible.
  // kTuned buckets as kBucket, but a bucket's algorithm is the fastest of cuBLASLt's first
  // kTuneCandidates for the first shape of the bucket met without accumulation, each timed on that
  // call's own operands and stream (kTuneCalls calls after an untimed one; the call's own launch
  // follows and overwrites C): cuBLASLt's first answer is up to 9% slower than the best of them on
  // some of Mixtral-8x7B's expert GEMMs (results/2026-11-28-session37). The tuning waits on the
  // host once per bucket, in the warm-up steps where the shapes recur. A shape met first while
  // accumulating, or while its stream is captured into a graph, takes its own query's first
  // answer (and keeps it) unless its bucket is tuned already. The choice follows the timings, so
  // two runs may choose, and round, differently.
  void set_algo_policy(AlgoPolicy p) {
    algo_policy_ = p;
    choices_.clear();  // a bucket's key and a shape's may coincide across policies
  }
  static constexpr int kTuneCandidates = kGemmTuneCandidates, kTuneCalls = 3;

  // Most problems one grouped-batched call takes (the size of its device pointer array).
  static constexpr int kMaxGroupedProblems = 4096;

 private:
  // Everything that selects a plan. Pointer alignments are part of it: the heuristic is told the
  // alignment it may assume, and an algorithm chosen for 256-byte aligned operands may not run on
  // an expert slice that starts at an odd row.
  struct PlanKey {
    bool trans_a, trans_b, accumulate;
    int64_t M, N, K;
    DType in, out;
    uint32_t align_a, align_b, align_c;
    uint8_t fp8 = 0;           // an FP8 GEMM's Fp8Scaling, 0 for the others
    int64_t lda = 0, ldb = 0;  // FP8: the operands' row strides (the others are dense)
    bool operator==(const PlanKey& o) const;
  };
  struct PlanKeyHash {
    size_t operator()(const PlanKey& k) const;
  };
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A, B, C (= D)
    cublasLtMatmulAlgo_t algo{};
  };

  // An algorithm chosen for every shape of a choice key (choice_key), or none found.
  struct Choice {
    bool found = false;
    cublasLtMatmulAlgo_t algo{};
  };

  void release() noexcept;  // frees whatever the constructor got (also after a partial one)
  // One call of the GEMM at hand with `algo` under `plan`'s descriptors, on its stream: how kTuned
  // times a candidate.
  using TryAlgo = std::function<cublasStatus_t(const Plan&, const cublasLtMatmulAlgo_t&)>;
  const Plan& plan_for(const PlanKey& key, const TryAlgo& call, cudaStream_t stream);
  void describe(const PlanKey& key, Plan& plan) const;  // the descriptor and layouts of a shape
  void describe_fp8(const PlanKey& key, Plan& plan) const;
  static void destroy(Plan& plan) noexcept;
  // The key an algorithm is chosen by: the shape's, with M and K bucketed (gemm_algo_bucket)
  // where `bucketed`, and no accumulation or strides (the same choice serves them all).
  static PlanKey choice_key(const PlanKey& key, bool bucketed);
  // Whether the plan's shape runs `algo` (chosen for another shape) in our workspace.
  bool runs_here(const Plan& plan, const cublasLtMatmulAlgo_t& algo);
  // The heuristic's first algorithm for the shape; false when it has none.
  bool heuristic(const PlanKey& key, const Plan& plan, cublasLtMatmulAlgo_t* algo);
  // Its first `want` answers (none: empty).
  std::vector<cublasLtMatmulAlgo_t> heuristic_candidates(const PlanKey& key, const Plan& plan,
                                                         int want);
  // The algorithm of key's choice (choices_), chosen now if new by the policy: kTuned by timing
  // (tune), bucketed by the bucket's largest shape, else by this shape's query; false where the
  // choice cannot be made yet (kTuned while accumulating or capturing) or does not run this plan.
  bool chosen_algo(const PlanKey& key, const Plan& plan, const TryAlgo& call, cudaStream_t stream,
                   cublasLtMatmulAlgo_t* algo);
  // The first answer for a bucket's representative shape (its key, described apart).
  bool representative_algo(const PlanKey& bucket, cublasLtMatmulAlgo_t* algo);
  // kTuned: the fastest of the heuristic's first kTuneCandidates for this call; false where it
  // cannot be timed (accumulating, or inside a graph's capture).
  bool tune(const PlanKey& key, const Plan& plan, const TryAlgo& call, cudaStream_t stream,
            Choice* chosen);
  // ms of kTuneCalls calls with `algo`; infinity where a call fails.
  double time_algo(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const TryAlgo& call,
                   cudaStream_t stream);
  // One cuBLASLt GEMM with M, N, K > 0 on `stream` with workspace `ws`.
  void lt_matmul(bool trans_a, bool trans_b, const GemmProblem& p, bool accumulate, DType in,
                 DType out, void* ws, cudaStream_t stream);
  void grouped_lt(bool trans_a, bool trans_b, const std::vector<GemmProblem>& problems,
                  bool accumulate, DType in, DType out, cudaStream_t stream);
  // One FP8 cuBLASLt GEMM with M, N, K > 0 on `stream` with workspace `ws`.
  void lt_matmul_fp8(const Fp8Problem& p, Fp8Scaling scaling, bool accumulate, DType out, void* ws,
                     cudaStream_t stream);
  // launch(i, workspace, side stream) for the problems in order_, largest (flops(i)) first, each
  // onto the least-loaded side stream, forked from and joined into `stream`.
  void spread_over_side_streams(const std::function<double(int)>& flops,
                                const std::function<void(int, void*, cudaStream_t)>& launch,
                                cudaStream_t stream);
  // Whether the grouped sm90 kernel is asked for: the method, device offsets, fused epilogues on.
  bool sm90_takes(GroupedEpilogue epi, const int64_t* offsets_dev) const;
  // The kernel (made on first use) when `why` (the kernel's refusal) is empty, else nullptr
  // and one log line per reason.
  GroupedGemm* sm90_kernel(const GroupedGemmShape& s, GroupedEpilogue epi, const std::string& why);
  // Returns false (having done nothing) when the call cannot take this case.
  bool grouped_batched(bool trans_a, bool trans_b, const std::vector<GemmProblem>& problems,
                       bool accumulate, DType in, DType out, cudaStream_t stream);

  friend class ExpertGemmScope;
  std::array<GemmMethod, kNumExpertGemms> methods_ = {
      GemmMethod::kLtMultiStream, GemmMethod::kLtMultiStream, GemmMethod::kLtMultiStream,
      GemmMethod::kLtMultiStream, GemmMethod::kLtMultiStream, GemmMethod::kLtMultiStream};
  GemmMethod method_ = GemmMethod::kLtMultiStream;
  ExpertGemmClock clock_;
  size_t workspace_bytes_ = 0;
  cublasLtHandle_t lt_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* workspace_all_ = nullptr;  // (num_streams + 1) slices: [0] caller stream, [1 + i] side i
  std::vector<void*> workspaces_;
  std::vector<cudaStream_t> side_streams_;
  std::vector<cudaEvent_t> side_done_;
  cudaEvent_t fork_ = nullptr;
  std::unordered_map<PlanKey, Plan, PlanKeyHash> plans_;
  std::unordered_map<PlanKey, Choice, PlanKeyHash> choices_;  // by choice_key
  cudaEvent_t tune_start_ = nullptr, tune_end_ = nullptr;
  AlgoPolicy algo_policy_ = AlgoPolicy::kAuto;
  std::unique_ptr<GroupedGemm> grouped_sm90_;  // made on first use (it needs an sm_90 device)
  GroupedSchedule sm90_schedule_;
  bool sm90_fuse_swiglu_ = false;
  std::set<std::string> sm90_fallbacks_logged_;
  int64_t heuristic_queries_ = 0, tunings_ = 0;

  // Grouped-batched: the device pointer arrays (A, B, C, kMaxGroupedProblems each), their pinned
  // host staging copy, and events that keep a call from overwriting either while a previous call
  // may still read it.
  void** ptrs_dev_ = nullptr;
  void** ptrs_host_ = nullptr;
  cudaEvent_t staging_read_ = nullptr;  // after the upload: the staging copy may be rewritten
  cudaEvent_t ptrs_read_ = nullptr;     // after the GEMMs: the device arrays may be rewritten
  bool grouped_batched_used_ = false;

  // Scratch reused across calls (capacity only grows), so that steady state does not allocate.
  std::vector<int> order_;
  std::vector<double> load_;
  std::vector<cublasOperation_t> gb_ta_, gb_tb_;
  std::vector<int> gb_m_, gb_n_, gb_k_, gb_lda_, gb_ldb_, gb_ldc_, gb_size_;
  std::vector<float> gb_alpha_, gb_beta_;
};

// One expert GEMM of a step, with the SwiGLU kernel beside it that some methods fuse into it:
// the runner's calls in the scope run by that GEMM's method (GemmRunner::set_method(ExpertGemm,
// ...)), and while the runner's clock is on, their device time on `stream` counts as that
// GEMM's. The method before the scope is restored after it.
class ExpertGemmScope {
 public:
  ExpertGemmScope(GemmRunner& gemm, ExpertGemm which, cudaStream_t stream)
      : gemm_(gemm), stream_(stream), before_(gemm.method_) {
    gemm.method_ = gemm.methods_[size_t(which)];
    span_ = gemm.clock_.begin(which, stream);
  }
  ~ExpertGemmScope() {
    gemm_.clock_.end(span_, stream_);
    gemm_.method_ = before_;
  }
  ExpertGemmScope(const ExpertGemmScope&) = delete;
  ExpertGemmScope& operator=(const ExpertGemmScope&) = delete;

 private:
  GemmRunner& gemm_;
  cudaStream_t stream_;
  GemmMethod before_;
  int span_ = -1;
};

}  // namespace moe::cuda
