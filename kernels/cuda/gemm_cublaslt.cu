// The expert GEMMs on cuBLASLt (and, as an alternative for grouped GEMMs, cuBLAS's
// cublasGemmGroupedBatchedEx).
//
// Row-major through column-major: a row-major [R, C] matrix is the column-major [C, R] matrix with
// the same bytes, so row-major C = op(A) @ op(B) is column-major C^T = op(B)^T @ op(A)^T. cuBLAS
// is therefore called with its A = our B, its B = our A, m = N, n = M, its transa = our trans_b
// and its transb = our trans_a (transposing both sides does not change whether an operand is
// used as stored or transposed).
//
// Numerics match the CPU twin: fp32 accumulation (CUBLAS_COMPUTE_32F, which never uses TF32; only
// the _FAST_TF32 compute type or a TF32 math mode would), and split-K partial sums reduced in fp32,
// never in a bf16 output, so the sum is rounded to bf16 exactly once.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>

#include "core/error.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/storage.cuh"

namespace moe::cuda {

const char* gemm_method_name(GemmMethod m) {
  switch (m) {
    case GemmMethod::kLtMultiStream:
      return "lt_multistream";
    case GemmMethod::kGroupedBatched:
      return "grouped_batched";
    case GemmMethod::kGroupedSm90:
      return "grouped_sm90";
  }
  return "?";
}

bool gemm_method_from_name(const std::string& name, GemmMethod* m) {
  for (GemmMethod c :
       {GemmMethod::kLtMultiStream, GemmMethod::kGroupedBatched, GemmMethod::kGroupedSm90})
    if (name == gemm_method_name(c)) {
      *m = c;
      return true;
    }
  return false;
}

namespace {

cudaDataType_t cuda_type(DType d) { return d == DType::kBf16 ? CUDA_R_16BF : CUDA_R_32F; }

// The largest power of two (up to 256, cuBLASLt's default assumption) dividing the address.
uint32_t alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

void check_args(int64_t M, int64_t N, int64_t K, DType in, DType out, bool accumulate) {
  MOE_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm sizes M=" << M << " N=" << N << " K=" << K);
  // Measured on an H100 (2026-11-22): accumulating into a bf16 C differs from the CPU twin's
  // single rounding by rel_l2 2.8e-3, i.e. cuBLASLt rounds twice. The step accumulates only into
  // fp32, so the mode is refused rather than carried with numerics nobody checks.
  MOE_CHECK(!(accumulate && out == DType::kBf16),
            "gemm: accumulating into a bf16 output is not supported; accumulate in fp32");
  // cuBLAS(Lt) has no fp32-input kernels with a bf16 output, and nothing in the step needs one.
  MOE_CHECK(!(in == DType::kFp32 && out == DType::kBf16),
            "gemm: fp32 inputs with bf16 output are not supported (want in=bf16 or out=fp32)");
}

// Shape text for error messages.
std::string shape_text(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, DType in,
                       DType out, bool accumulate) {
  std::ostringstream os;
  os << (trans_a ? "T" : "N") << (trans_b ? "T" : "N") << " M=" << M << " N=" << N << " K=" << K
     << " in=" << dtype_name(in) << " out=" << dtype_name(out) << (accumulate ? " accumulate" : "");
  return os.str();
}

template <class T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, T value) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

template <class T>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, T value) {
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

}  // namespace

bool GemmRunner::PlanKey::operator==(const PlanKey& o) const {
  return trans_a == o.trans_a && trans_b == o.trans_b && accumulate == o.accumulate && M == o.M &&
         N == o.N && K == o.K && in == o.in && out == o.out && align_a == o.align_a &&
         align_b == o.align_b && align_c == o.align_c && fp8 == o.fp8 && lda == o.lda &&
         ldb == o.ldb;
}

size_t GemmRunner::PlanKeyHash::operator()(const PlanKey& k) const {
  size_t h = std::hash<int64_t>()(k.M);
  auto mix = [&h](uint64_t v) {
    h ^= std::hash<uint64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  mix(uint64_t(k.N));
  mix(uint64_t(k.K));
  mix(uint64_t(k.trans_a) | uint64_t(k.trans_b) << 1 | uint64_t(k.accumulate) << 2 |
      uint64_t(k.in) << 3 | uint64_t(k.out) << 5);
  mix(uint64_t(k.align_a) | uint64_t(k.align_b) << 16 | uint64_t(k.align_c) << 32 |
      uint64_t(k.fp8) << 48);
  mix(uint64_t(k.lda) ^ uint64_t(k.ldb) << 32);
  return h;
}

GemmRunner::GemmRunner(int num_streams, size_t workspace_bytes_per_stream) {
  MOE_CHECK(num_streams >= 1, "GemmRunner needs at least one side stream, got " << num_streams);
  // Slices of one allocation, each kept 256-byte aligned as cuBLASLt wants its workspace.
  workspace_bytes_ = (workspace_bytes_per_stream + 255) / 256 * 256;
  try {
    CUBLAS_CHECK(cublasLtCreate(&lt_));
    CUBLAS_CHECK(cublasCreate(&blas_));
    CUBLAS_CHECK(cublasSetPointerMode(blas_, CUBLAS_POINTER_MODE_HOST));
    // Default math (no TF32 for fp32), and split-K reductions in fp32 even for a bf16 output.
    const int math = CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    CUBLAS_CHECK(cublasSetMathMode(blas_, cublasMath_t(math)));

    const size_t num_workspaces = size_t(num_streams) + 1;
    if (workspace_bytes_ > 0) {
      CUDA_CHECK(cudaMalloc(&workspace_all_, workspace_bytes_ * num_workspaces));
    }
    for (size_t i = 0; i < num_workspaces; ++i) {
      workspaces_.push_back(
          workspace_all_ ? static_cast<char*>(workspace_all_) + i * workspace_bytes_ : nullptr);
    }
    // Non-blocking: the side streams must not serialise with the legacy default stream; they
    // are ordered only by the fork and join events.
    for (int i = 0; i < num_streams; ++i) {
      cudaStream_t s = nullptr;
      CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      side_streams_.push_back(s);
      cudaEvent_t e = nullptr;
      CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      side_done_.push_back(e);
    }
    CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&staging_read_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&ptrs_read_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreate(&tune_start_));
    CUDA_CHECK(cudaEventCreate(&tune_end_));

    const size_t ptr_bytes = 3 * size_t(kMaxGroupedProblems) * sizeof(void*);
    CUDA_CHECK(cudaMalloc(&ptrs_dev_, ptr_bytes));
    CUDA_CHECK(cudaMallocHost(&ptrs_host_, ptr_bytes));
  } catch (...) {
    release();
    throw;
  }
  order_.reserve(256);
  load_.reserve(side_streams_.size());
}

GemmRunner::~GemmRunner() { release(); }

void GemmRunner::release() noexcept {
  // Work queued on the caller's stream may still use the workspaces and pointer arrays.
  cudaDeviceSynchronize();
  for (auto& kv : plans_) destroy(kv.second);
  plans_.clear();
  choices_.clear();
  for (cudaStream_t s : side_streams_) cudaStreamDestroy(s);
  for (cudaEvent_t e : side_done_) cudaEventDestroy(e);
  side_streams_.clear();
  side_done_.clear();
  if (fork_) cudaEventDestroy(fork_);
  if (staging_read_) cudaEventDestroy(staging_read_);
  if (ptrs_read_) cudaEventDestroy(ptrs_read_);
  if (tune_start_) cudaEventDestroy(tune_start_);
  if (tune_end_) cudaEventDestroy(tune_end_);
  if (ptrs_dev_) cudaFree(ptrs_dev_);
  if (ptrs_host_) cudaFreeHost(ptrs_host_);
  if (workspace_all_) cudaFree(workspace_all_);
  if (blas_) cublasDestroy(blas_);
  if (lt_) cublasLtDestroy(lt_);
  fork_ = staging_read_ = ptrs_read_ = tune_start_ = tune_end_ = nullptr;
  ptrs_dev_ = ptrs_host_ = nullptr;
  workspace_all_ = nullptr;
  blas_ = nullptr;
  lt_ = nullptr;
}

// ---- one GEMM on cuBLASLt ----

int64_t gemm_algo_bucket(int64_t x) {
  if (x <= 64) return (x + 15) / 16 * 16;
  int64_t pow2 = 128;
  while (pow2 < x) pow2 *= 2;
  const int64_t step = pow2 / 8;
  return (x + step - 1) / step * step;
}

AlgoPolicy algo_policy_of(GemmAlgo algo) {
  switch (algo) {
    case GemmAlgo::kBucket:
      return AlgoPolicy::kBucket;
    case GemmAlgo::kExact:
      return AlgoPolicy::kExact;
    case GemmAlgo::kTuned:
      return AlgoPolicy::kTuned;
    case GemmAlgo::kAuto:
      break;
  }
  return AlgoPolicy::kAuto;
}

bool gemm_algo_by_bucket(AlgoPolicy policy, int64_t M, int64_t N, int64_t K) {
  if (policy != AlgoPolicy::kAuto) return policy != AlgoPolicy::kExact;
  return 2.0 * double(M) * double(N) * double(K) < double(int64_t(1) << 35);
}

void GemmRunner::describe(const PlanKey& key, Plan& plan) const {
  if (key.fp8) {
    describe_fp8(key, plan);
    return;
  }
  // cuBLASLt's A is our B and its B is our A (see the top of the file); m = N, n = M.
  const cublasOperation_t op_a = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const uint64_t m = uint64_t(key.N), n = uint64_t(key.M), k = uint64_t(key.K);
  const cudaDataType_t in_type = cuda_type(key.in), out_type = cuda_type(key.out);
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(op_a));
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(op_b));
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, int32_t(CUBLASLT_POINTER_MODE_HOST));
  // Column-major, densely packed: an operand used as-is (op N) is stored rows x cols with the
  // rows as leading dimension; a transposed one is stored the other way round.
  const uint64_t a_rows = op_a == CUBLAS_OP_N ? m : k, a_cols = op_a == CUBLAS_OP_N ? k : m;
  const uint64_t b_rows = op_b == CUBLAS_OP_N ? k : n, b_cols = op_b == CUBLAS_OP_N ? n : k;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, in_type, a_rows, a_cols, int64_t(a_rows)));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, in_type, b_rows, b_cols, int64_t(b_rows)));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.c, out_type, m, n, int64_t(m)));
}

// cuBLASLt's A is our B [N, K] (column-major [K, N], used transposed) and its B our A [M, K]
// (column-major [K, M]): "TN", the one layout of Hopper's FP8 kernels. A stride below K (a bucket's
// representative shape, whose K is rounded up) is raised to K.
void GemmRunner::describe_fp8(const PlanKey& key, Plan& plan) const {
  const uint64_t m = uint64_t(key.N), n = uint64_t(key.M), k = uint64_t(key.K);
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(CUBLAS_OP_T));
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(CUBLAS_OP_N));
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, int32_t(CUBLASLT_POINTER_MODE_HOST));
  const auto scaling = Fp8Scaling(key.fp8);
  const int32_t ours_a = scaling == Fp8Scaling::kTensor ? CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F
                                                        : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  const int32_t ours_b = scaling == Fp8Scaling::kTensor ? CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F
                         : scaling == Fp8Scaling::kRowsTimesTiles
                             ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F
                             : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, ours_b);
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, ours_a);
  // The heuristic sees scale pointers: until a call sets the real ones, an aligned device address
  // (the workspace; never read before they are set).
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, workspace_all_);
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, workspace_all_);
  const int64_t ldb = std::max<int64_t>(key.ldb, key.K), lda = std::max<int64_t>(key.lda, key.K);
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_8F_E4M3, k, m, ldb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_8F_E4M3, k, n, lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.c, cuda_type(key.out), m, n, int64_t(m)));
}

void GemmRunner::destroy(Plan& plan) noexcept {
  if (plan.a) cublasLtMatrixLayoutDestroy(plan.a);
  if (plan.b) cublasLtMatrixLayoutDestroy(plan.b);
  if (plan.c) cublasLtMatrixLayoutDestroy(plan.c);
  if (plan.desc) cublasLtMatmulDescDestroy(plan.desc);
  plan = Plan{};
}

std::vector<cublasLtMatmulAlgo_t> GemmRunner::heuristic_candidates(const PlanKey& key,
                                                                   const Plan& plan, int want) {
  cublasLtMatmulPreference_t pref = nullptr;
  int returned = 0;
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(want));
  try {
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(workspace_bytes_));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);
    // Split-K partial sums are allowed only when reduced in a separate pass in fp32 (compute
    // type; for an fp32 output the output type is fp32 too). Not in place: that scheme adds the
    // partial sums in the output buffer, in bf16 for a bf16 output (rounding more than once,
    // unlike the CPU twin), and is excluded for reproducibility too. Algorithms without split-K
    // (scheme NONE) always pass the mask.
    uint32_t mask = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    if (key.out == DType::kFp32) mask |= CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    set_pref(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, mask);
    ++heuristic_queries_;
    const cublasStatus_t rc = cublasLtMatmulAlgoGetHeuristic(
        lt_, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, want, results.data(), &returned);
    if (rc == CUBLAS_STATUS_NOT_SUPPORTED || (key.fp8 && rc == CUBLAS_STATUS_INVALID_VALUE)) {
      returned = 0;  // "no algorithm" (for FP8 cuBLASLt also answers so to a shape it refuses)
    } else {
      CUBLAS_CHECK(rc);
    }
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  } catch (...) {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  std::vector<cublasLtMatmulAlgo_t> algos;
  for (int i = 0; i < returned; ++i) algos.push_back(results[size_t(i)].algo);
  return algos;
}

bool GemmRunner::heuristic(const PlanKey& key, const Plan& plan, cublasLtMatmulAlgo_t* algo) {
  const std::vector<cublasLtMatmulAlgo_t> first = heuristic_candidates(key, plan, 1);
  if (!first.empty()) *algo = first[0];
  return !first.empty();
}

GemmRunner::PlanKey GemmRunner::choice_key(const PlanKey& key, bool bucketed) {
  PlanKey choice = key;
  if (bucketed) {
    choice.M = gemm_algo_bucket(key.M);
    choice.K = gemm_algo_bucket(key.K);
  }
  // The same algorithms run with or without accumulation (cuBLASLt's descriptions hold no beta).
  // FP8's row strides follow the step's total rows: keyed by them, every step would meet new
  // choices (a bucket's representative shape takes K, as describe_fp8 raises a stride below K;
  // each plan's check covers its own strides).
  choice.accumulate = false;
  choice.lda = choice.ldb = 0;
  return choice;
}

bool GemmRunner::runs_here(const Plan& plan, const cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulHeuristicResult_t check{};
  const cublasStatus_t rc =
      cublasLtMatmulAlgoCheck(lt_, plan.desc, plan.a, plan.b, plan.c, plan.c, &algo, &check);
  return rc == CUBLAS_STATUS_SUCCESS && check.workspaceSize <= workspace_bytes_;
}

bool GemmRunner::representative_algo(const PlanKey& bucket, cublasLtMatmulAlgo_t* algo) {
  Plan rep;
  bool found = false;
  try {
    describe(bucket, rep);
    found = heuristic(bucket, rep, algo);
  } catch (...) {
    destroy(rep);
    throw;
  }
  destroy(rep);
  return found;
}

bool GemmRunner::chosen_algo(const PlanKey& key, const Plan& plan, const TryAlgo& call,
                             cudaStream_t stream, cublasLtMatmulAlgo_t* algo) {
  const bool bucketed = gemm_algo_by_bucket(algo_policy_, key.M, key.N, key.K);
  const PlanKey choice = choice_key(key, bucketed);
  auto it = choices_.find(choice);
  bool on_this_plan = false;  // chosen just now by this plan's own query or timing
  if (it == choices_.end()) {
    Choice chosen;
    if (algo_policy_ == AlgoPolicy::kTuned) {
      if (!tune(key, plan, call, stream, &chosen)) return false;  // untimeable here: not yet
      on_this_plan = true;
    } else if (bucketed) {
      chosen.found = representative_algo(choice, &chosen.algo);
    } else {
      chosen.found = heuristic(key, plan, &chosen.algo);
      on_this_plan = true;
    }
    it = choices_.emplace(choice, chosen).first;
  }
  // Chosen for another shape of the choice (the bucket's largest, the first one tuned, the first
  // strides): this one must be able to run it in our workspace.
  if (!it->second.found || (!on_this_plan && !runs_here(plan, it->second.algo))) return false;
  *algo = it->second.algo;
  return true;
}

double GemmRunner::time_algo(const Plan& plan, const cublasLtMatmulAlgo_t& algo,
                             const TryAlgo& call, cudaStream_t stream) {
  constexpr double kFailed = std::numeric_limits<double>::infinity();
  if (call(plan, algo) != CUBLAS_STATUS_SUCCESS) return kFailed;  // untimed: wakes the kernel
  CUDA_CHECK(cudaEventRecord(tune_start_, stream));
  for (int i = 0; i < kTuneCalls; ++i)
    if (call(plan, algo) != CUBLAS_STATUS_SUCCESS) return kFailed;
  CUDA_CHECK(cudaEventRecord(tune_end_, stream));
  CUDA_CHECK(cudaEventSynchronize(tune_end_));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, tune_start_, tune_end_));
  return ms;
}

bool GemmRunner::tune(const PlanKey& key, const Plan& plan, const TryAlgo& call,
                      cudaStream_t stream, Choice* chosen) {
  // Timing writes C: not where C holds a sum to add to, nor inside a graph's capture.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (key.accumulate || capture != cudaStreamCaptureStatusNone) return false;
  double best = std::numeric_limits<double>::infinity();
  for (const cublasLtMatmulAlgo_t& candidate : heuristic_candidates(key, plan, kTuneCandidates)) {
    const double ms = time_algo(plan, candidate, call, stream);
    if (ms < best) {  // the heuristic's order breaks ties
      best = ms;
      *chosen = {true, candidate};
    }
  }
  ++tunings_;
  return true;
}

const GemmRunner::Plan& GemmRunner::plan_for(const PlanKey& key, const TryAlgo& call,
                                             cudaStream_t stream) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan plan;
  try {
    describe(key, plan);
    const bool found =
        chosen_algo(key, plan, call, stream, &plan.algo) || heuristic(key, plan, &plan.algo);
    MOE_CHECK(found, "cuBLASLt heuristic found no algorithm for gemm "
                         << (key.fp8 ? "FP8 (scaling " + std::to_string(key.fp8) + ", lda " +
                                           std::to_string(key.lda) + ", ldb " +
                                           std::to_string(key.ldb) + ") "
                                     : std::string())
                         << shape_text(key.trans_a, key.trans_b, key.M, key.N, key.K, key.in,
                                       key.out, key.accumulate)
                         << " (alignments A=" << key.align_a << " B=" << key.align_b << " C="
                         << key.align_c << " bytes, workspace " << workspace_bytes_ << ")");
  } catch (...) {
    destroy(plan);
    throw;
  }
  return plans_.emplace(key, plan).first->second;
}

void GemmRunner::lt_matmul(bool trans_a, bool trans_b, const GemmProblem& p, bool accumulate,
                           DType in, DType out, void* ws, cudaStream_t stream) {
  const PlanKey key{trans_a,           trans_b,           accumulate,       p.M, p.N, p.K, in, out,
                    alignment_of(p.A), alignment_of(p.B), alignment_of(p.C)};
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  // C and D are the same buffer with the same layout: an in-place update when beta = 1.
  auto call = [&](const Plan& plan, const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(lt_, plan.desc, &alpha, p.B, plan.a, p.A, plan.b, &beta, p.C, plan.c, p.C,
                          plan.c, &algo, ws, workspace_bytes_, stream);
  };
  const Plan& plan = plan_for(key, call, stream);
  CUBLAS_CHECK(call(plan, plan.algo));
}

void GemmRunner::gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const void* A,
                      const void* B, void* C, bool accumulate, DType in, DType out,
                      cudaStream_t stream) {
  check_args(M, N, K, in, out, accumulate);
  if (M == 0 || N == 0) return;
  if (K == 0) {
    // cuBLASLt may reject k = 0; the empty sum is zero (all-zero bits in bf16 and fp32).
    if (!accumulate) CUDA_CHECK(cudaMemsetAsync(C, 0, size_t(M * N) * stored_bytes(out), stream));
    return;
  }
  lt_matmul(trans_a, trans_b, GemmProblem{M, N, K, A, B, C}, accumulate, in, out, workspaces_[0],
            stream);
}

void GemmRunner::lt_matmul_fp8(const Fp8Problem& p, Fp8Scaling scaling, bool accumulate, DType out,
                               void* ws, cudaStream_t stream) {
  // Every FP8 operand is 16-byte aligned, and plans assume no more: experts at any row offset
  // share a plan, so a step with new row offsets makes no new heuristic queries for them.
  PlanKey key{false, true, accumulate, p.M, p.N, p.K, DType::kBf16, out, 16, 16, 16};
  MOE_CHECK(
      alignment_of(p.A.codes) >= 16 && alignment_of(p.B.codes) >= 16 && alignment_of(p.C) >= 16,
      "grouped_fp8: operands must be 16-byte aligned");
  key.fp8 = uint8_t(scaling);
  key.lda = p.A.ld;
  key.ldb = p.B.ld;
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  auto call = [&](const Plan& plan, const cublasLtMatmulAlgo_t& algo) {
    // The scales move with every expert; the rest of the plan stays (read when the call is made).
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, p.B.scales);
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, p.A.scales);
    return cublasLtMatmul(lt_, plan.desc, &alpha, p.B.codes, plan.a, p.A.codes, plan.b, &beta, p.C,
                          plan.c, p.C, plan.c, &algo, ws, workspace_bytes_, stream);
  };
  const Plan& plan = plan_for(key, call, stream);
  const cublasStatus_t rc = call(plan, plan.algo);
  MOE_CHECK(rc == CUBLAS_STATUS_SUCCESS, "cublasLtMatmul (FP8, scaling "
                                             << int(scaling) << ") failed with status " << int(rc)
                                             << " for M=" << p.M << " N=" << p.N << " K=" << p.K
                                             << " lda=" << p.A.ld << " ldb=" << p.B.ld
                                             << " scale alignments A=" << alignment_of(p.A.scales)
                                             << " B=" << alignment_of(p.B.scales));
}

void GemmRunner::grouped_fp8(const std::vector<Fp8Problem>& problems, Fp8Scaling scaling,
                             bool accumulate, DType out, cudaStream_t stream) {
  order_.clear();
  for (int i = 0; i < int(problems.size()); ++i) {
    const Fp8Problem& p = problems[i];
    check_args(p.M, p.N, p.K, DType::kBf16, out, accumulate);
    MOE_CHECK(p.A.ld >= p.K && p.B.ld >= p.K,
              "grouped_fp8: row strides " << p.A.ld << ", " << p.B.ld << " < K " << p.K);
    if (p.M == 0 || p.N == 0) continue;
    if (p.K == 0) {
      if (!accumulate)
        CUDA_CHECK(cudaMemsetAsync(p.C, 0, size_t(p.M * p.N) * stored_bytes(out), stream));
      continue;
    }
    order_.push_back(i);
  }
  if (order_.size() == 1) {
    lt_matmul_fp8(problems[order_[0]], scaling, accumulate, out, workspaces_[0], stream);
    return;
  }
  spread_over_side_streams(
      [&](int i) { return double(problems[i].M) * double(problems[i].N) * double(problems[i].K); },
      [&](int i, void* ws, cudaStream_t s) {
        lt_matmul_fp8(problems[i], scaling, accumulate, out, ws, s);
      },
      stream);
}

// ---- grouped GEMMs ----

bool GemmRunner::grouped_sm90(const GroupedGemmShape& s, const int64_t* offsets_dev, const void* A,
                              const void* B, void* C, DType in, DType out, cudaStream_t stream,
                              GroupedEpilogue epi, void* aux) {
  if (!sm90_takes(epi, offsets_dev)) return false;
  std::string why = GroupedGemm::unsupported_reason(s, A, B, C, in, out);
  if (why.empty()) why = GroupedGemm::fused_unsupported_reason(s, epi, out);
  GroupedGemm* gg = sm90_kernel(s, epi, why);
  if (gg) gg->run_fused(epi, s, offsets_dev, A, B, C, aux, in, out, stream);
  return gg != nullptr;
}

bool GemmRunner::grouped_sm90_fp8(const GroupedGemmShape& s, const int64_t* offsets_dev,
                                  const void* A, const void* B, const GroupedFp8Scales& scales,
                                  void* C, DType out, cudaStream_t stream, GroupedEpilogue epi,
                                  void* aux) {
  if (!sm90_takes(epi, offsets_dev)) return false;
  const std::string why = GroupedGemm::fp8_unsupported_reason(s, A, B, C, epi, out, &scales);
  GroupedGemm* gg = sm90_kernel(s, epi, why);
  if (gg) gg->run_fp8(epi, s, offsets_dev, A, B, scales, C, aux, out, stream);
  return gg != nullptr;
}

bool GemmRunner::sm90_takes(GroupedEpilogue epi, const int64_t* offsets_dev) const {
  return method_ == GemmMethod::kGroupedSm90 && offsets_dev &&
         (!fuses_swiglu(epi) || sm90_fuse_swiglu_);
}

GroupedGemm* GemmRunner::sm90_kernel(const GroupedGemmShape& s, GroupedEpilogue epi,
                                     const std::string& why) {
  if (!why.empty()) {
    if (sm90_fallbacks_logged_.insert(why).second)
      spdlog::info(
          "gemm.method grouped_sm90: an expert GEMM (M={} N={} K={}{}) runs {} instead: {}", s.M,
          s.N, s.K,
          fuses_swiglu(epi)              ? ", SwiGLU fused"
          : epi == GroupedEpilogue::kAdd ? ", adding to C"
                                         : "",
          fuses_swiglu(epi) ? "unfused" : "on lt_multistream", why);
    return nullptr;
  }
  if (!grouped_sm90_) {
    grouped_sm90_ = std::make_unique<GroupedGemm>();
    grouped_sm90_->set_schedule(sm90_schedule_);
  }
  return grouped_sm90_.get();
}

void GemmRunner::set_sm90_schedule(const GroupedSchedule& s) {
  GroupedGemm::check_schedule(s);  // now, though the kernel is made on first use
  sm90_schedule_ = s;
  if (grouped_sm90_) grouped_sm90_->set_schedule(s);
}

void GemmRunner::grouped(bool trans_a, bool trans_b, const std::vector<GemmProblem>& problems,
                         bool accumulate, DType in, DType out, cudaStream_t stream) {
  for (const GemmProblem& p : problems) check_args(p.M, p.N, p.K, in, out, accumulate);
  if (method_ == GemmMethod::kGroupedBatched &&
      grouped_batched(trans_a, trans_b, problems, accumulate, in, out, stream)) {
    return;
  }
  grouped_lt(trans_a, trans_b, problems, accumulate, in, out, stream);
}

void GemmRunner::grouped_lt(bool trans_a, bool trans_b, const std::vector<GemmProblem>& problems,
                            bool accumulate, DType in, DType out, cudaStream_t stream) {
  // Empty problems are settled on `stream` itself: K == 0 zeroes C, M or N == 0 does nothing.
  order_.clear();
  for (int i = 0; i < int(problems.size()); ++i) {
    const GemmProblem& p = problems[i];
    if (p.M == 0 || p.N == 0) continue;
    if (p.K == 0) {
      if (!accumulate) {
        CUDA_CHECK(cudaMemsetAsync(p.C, 0, size_t(p.M * p.N) * stored_bytes(out), stream));
      }
      continue;
    }
    order_.push_back(i);
  }
  if (order_.empty()) return;
  if (order_.size() == 1) {
    // Nothing to overlap: skip the fork and join.
    lt_matmul(trans_a, trans_b, problems[order_[0]], accumulate, in, out, workspaces_[0], stream);
    return;
  }

  spread_over_side_streams(
      [&](int i) { return double(problems[i].M) * double(problems[i].N) * double(problems[i].K); },
      [&](int i, void* ws, cudaStream_t s) {
        lt_matmul(trans_a, trans_b, problems[i], accumulate, in, out, ws, s);
      },
      stream);
}

void GemmRunner::spread_over_side_streams(
    const std::function<double(int)>& flops,
    const std::function<void(int, void*, cudaStream_t)>& launch, cudaStream_t stream) {
  if (order_.empty()) return;
  // Largest first, each onto the least-loaded stream (greedy longest-processing-time). The
  // assignment depends on the shapes only, and each GEMM's result does not depend on its stream
  // (same plan, same workspace size), so results are reproducible.
  std::stable_sort(order_.begin(), order_.end(), [&](int x, int y) { return flops(x) > flops(y); });
  const int used = int(std::min(order_.size(), side_streams_.size()));
  load_.assign(size_t(used), 0.0);

  // Fork: every side stream used waits for the work already queued on `stream`.
  CUDA_CHECK(cudaEventRecord(fork_, stream));
  for (int s = 0; s < used; ++s) CUDA_CHECK(cudaStreamWaitEvent(side_streams_[s], fork_, 0));
  for (int i : order_) {
    const int s = int(std::min_element(load_.begin(), load_.end()) - load_.begin());
    load_[s] += flops(i);
    launch(i, workspaces_[1 + s], side_streams_[s]);
  }
  // Join: `stream` waits for every side stream used.
  for (int s = 0; s < used; ++s) {
    CUDA_CHECK(cudaEventRecord(side_done_[s], side_streams_[s]));
    CUDA_CHECK(cudaStreamWaitEvent(stream, side_done_[s], 0));
  }
}

bool GemmRunner::grouped_batched(bool trans_a, bool trans_b,
                                 const std::vector<GemmProblem>& problems, bool accumulate,
                                 DType in, DType out, cudaStream_t stream) {
  // cublasGemmGroupedBatchedEx under CUBLAS_COMPUTE_32F takes A/B -> C of bf16 -> bf16, fp16 ->
  // fp16 or fp32 -> fp32 only: bf16 inputs with an fp32 output (the weight gradients) are not
  // supported, so that case runs the cuBLASLt loop instead.
  if (in != out) return false;
  // Weight gradients (A transposed: the rows are the reduction) stay on the loop in bf16 too: the
  // grouped call was slower there (Qwen3-30B-A3B at EP 1, bf16 gradients, H200: experts_bwd
  // 3.11 ms against 2.51 with the loop's fp32 gradients; results/2026-11-23-h200-ep1).
  if (trans_a) return false;
  // Its 16-bit kernels need suitably aligned pointers (the cuBLAS docs ask for 16 bytes, less only
  // when k allows it). Rather than reproduce that rule, anything less than 16-byte aligned (an
  // expert slice starting at an odd row of an odd-width matrix) goes to the cuBLASLt loop, which
  // picks algorithms by the actual alignment. It also takes only int sizes. (lda, ldb: of our
  // row-major A and B.)
  const int64_t in_bytes = int64_t(stored_bytes(in)), out_bytes = int64_t(stored_bytes(out));
  int count = 0;
  for (const GemmProblem& p : problems) {
    if (p.M == 0 || p.N == 0 || p.K == 0) continue;
    if (alignment_of(p.A) < 16 || alignment_of(p.B) < 16 || alignment_of(p.C) < 16) return false;
    // Rows of 16-byte multiples too (every real expert shape has them), so that no column of
    // any operand starts less aligned than its base pointer.
    const int64_t lda = trans_a ? p.M : p.K, ldb = trans_b ? p.K : p.N;
    if ((lda * in_bytes) % 16 || (ldb * in_bytes) % 16 || (p.N * out_bytes) % 16) return false;
    if (p.M > INT_MAX || p.N > INT_MAX || p.K > INT_MAX) return false;
    ++count;
  }
  if (count > kMaxGroupedProblems) return false;

  // Empty problems as in the cuBLASLt path: cuBLAS would accept them, but this keeps the two
  // methods identical on the edge cases.
  if (!accumulate) {
    for (const GemmProblem& p : problems) {
      if (p.M > 0 && p.N > 0 && p.K == 0) {
        CUDA_CHECK(cudaMemsetAsync(p.C, 0, size_t(p.M * p.N) * stored_bytes(out), stream));
      }
    }
  }
  if (count == 0) return true;

  // One group per problem (group_size 1): each expert has its own row count, so its own m/n/k.
  // Host arrays; the pointer arrays must be in device memory.
  gb_ta_.assign(size_t(count), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N);
  gb_tb_.assign(size_t(count), trans_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  gb_m_.clear();
  gb_n_.clear();
  gb_k_.clear();
  gb_lda_.clear();
  gb_ldb_.clear();
  gb_ldc_.clear();
  gb_size_.assign(size_t(count), 1);
  gb_alpha_.assign(size_t(count), 1.0f);
  gb_beta_.assign(size_t(count), accumulate ? 1.0f : 0.0f);

  // The pinned staging copy is rewritten only once the previous upload has read it (normally
  // long done: this wait is the one host synchronisation of the path).
  if (grouped_batched_used_) CUDA_CHECK(cudaEventSynchronize(staging_read_));
  int j = 0;
  for (const GemmProblem& p : problems) {
    if (p.M == 0 || p.N == 0 || p.K == 0) continue;
    // Swapped as in the cuBLASLt path: cuBLAS's A is our B, its B our A, m = N, n = M.
    gb_m_.push_back(int(p.N));
    gb_n_.push_back(int(p.M));
    gb_k_.push_back(int(p.K));
    gb_lda_.push_back(int(trans_b ? p.K : p.N));
    gb_ldb_.push_back(int(trans_a ? p.M : p.K));
    gb_ldc_.push_back(int(p.N));
    ptrs_host_[j] = const_cast<void*>(p.B);
    ptrs_host_[count + j] = const_cast<void*>(p.A);
    ptrs_host_[2 * count + j] = p.C;
    ++j;
  }
  // The device arrays are rewritten only after the previous call's GEMMs have read them (they
  // are ordered already when both calls use the same stream).
  if (grouped_batched_used_) CUDA_CHECK(cudaStreamWaitEvent(stream, ptrs_read_, 0));
  CUDA_CHECK(cudaMemcpyAsync(ptrs_dev_, ptrs_host_, 3 * size_t(count) * sizeof(void*),
                             cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaEventRecord(staging_read_, stream));

  CUBLAS_CHECK(cublasSetStream(blas_, stream));
  // cublasSetStream resets the handle to cuBLAS's own workspace pool: hand it ours afterwards.
  // Slice 0 is also gemm()'s, which is safe as both run on the caller's stream.
  CUBLAS_CHECK(cublasSetWorkspace(blas_, workspaces_[0], workspace_bytes_));
  const cudaDataType_t type = cuda_type(in);
  const void* const* dev_a = ptrs_dev_;
  const void* const* dev_b = ptrs_dev_ + count;
  void* const* dev_c = ptrs_dev_ + 2 * count;
  CUBLAS_CHECK(cublasGemmGroupedBatchedEx(
      blas_, gb_ta_.data(), gb_tb_.data(), gb_m_.data(), gb_n_.data(), gb_k_.data(),
      gb_alpha_.data(), dev_a, type, gb_lda_.data(), dev_b, type, gb_ldb_.data(), gb_beta_.data(),
      dev_c, type, gb_ldc_.data(), count, gb_size_.data(), CUBLAS_COMPUTE_32F));
  CUDA_CHECK(cudaEventRecord(ptrs_read_, stream));
  grouped_batched_used_ = true;
  return true;
}

}  // namespace moe::cuda
