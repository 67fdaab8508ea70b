// check_backend_supports: refusals a backend makes before any rank allocates, with a message
// that names the field and the fix. Runs without a GPU: it reads the workload only.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "app/backend.h"
#include "core/buffer_plan.h"
#include "core/fp8.h"
#include "core/fp8_buffers.h"
#include "core/router_scratch.h"
#include "core/workload.h"
#include "tests/common/user_error.h"

namespace moe::test {
namespace {

Workload fp8_workload(int64_t experts, int64_t ep) {
  Workload w = workload_from_json_text(
      R"({"model": {"hidden": 128, "ffn": 64, "experts": )" + std::to_string(experts) +
          R"(, "topk": 2}, "tokens_per_rank": 16, "align": 16, "precision": "fp8_block",
          "mesh": {"ep": )" +
          std::to_string(ep) + "}}",
      "t");
  return w;
}

// The CUDA quantization kernel keeps its groups in shared memory: more local experts than it
// holds are refused up front, not by an internal error mid-step.
TEST(BackendChecks, CudaFp8RefusesMoreLocalExpertsThanTheQuantizationTakes) {
  const std::string refused =
      user_error_of([] { check_backend_supports("cuda", fp8_workload(2 * kFp8CudaMaxGroups, 1)); });
  EXPECT_NE(refused.find("local experts"), std::string::npos) << refused;
  EXPECT_NE(refused.find("mesh.ep"), std::string::npos) << refused;
  EXPECT_EQ(
      user_error_of([] { check_backend_supports("cuda", fp8_workload(2 * kFp8CudaMaxGroups, 2)); }),
      "(no UserError)");
  EXPECT_EQ(
      user_error_of([] { check_backend_supports("cpu", fp8_workload(2 * kFp8CudaMaxGroups, 1)); }),
      "(no UserError)");
}

// The CUDA backend's FP8 codes and scratch are in the memory estimate that --dry-run prints and
// the run refuses by before allocating: DeepSeek-V3 at EP 1 keeps 21 GiB of FP8 weight codes
// beside its bf16 ones, which the estimate left out (with fp32 gradients 89 GiB a rank, estimated
// at 67: an 80 GB GPU was not refused). On the H200 (results/2026-11-28-session31 call 3) the
// high-water marks of the three bench workloads' FP8 steps were within 0.1% of this estimate.
TEST(BackendChecks, CudaMemoryEstimateCountsFp8CodesAndScratch) {
  Workload w = fp8_workload(8, 1);
  resolve_and_validate(w, 1);
  w.check = CheckMode::kOff;
  const int64_t H = 128, F = 64, E = 8;
  auto step = [&](Precision p, const std::string& backend) {
    Workload v = w;
    v.precision = p;
    return estimate_memory_need(v, 1, backend).step.total();
  };
  const int64_t bf16 = step(Precision::kBf16, "cuda");
  for (Precision p : {Precision::kFp8Tensor, Precision::kFp8Block}) {
    const int64_t fp8 = step(p, "cuda");
    // At least the weights' codes both ways round, and what cuda_fp8_step_bytes says.
    EXPECT_GE(fp8 - bf16, 2 * E * 3 * H * F);
    Workload v = w;
    v.precision = p;
    // fp8_tensor's reported scales (core/fp8_scales.h) on either backend.
    const BufferPlan plan = plan_step_buffers(v, 2, 4);
    EXPECT_EQ(plan.fp8_scales, p == Precision::kFp8Tensor ? 4 * 3 * E : 0);
    EXPECT_EQ(fp8 - bf16, cuda_fp8_step_bytes(v, plan.planned_rows) + plan.fp8_scales);
    // The CPU backend keeps no such codes.
    EXPECT_EQ(step(p, "cpu"), step(Precision::kBf16, "cpu") + plan.fp8_scales);
  }
  Workload bf = w;
  bf.precision = Precision::kBf16;
  EXPECT_EQ(cuda_fp8_step_bytes(bf, 128), 0);
  // Shared experts add their own codes. The forward keeps xe's and a's transposed codes (128 rows
  // by H and F) for the weight gradients; a pipeline's chunks keep none (their weight gradients
  // take the chunks' rows gathered), nor xe's with dispatch_dtype fp8 (its rows come as codes).
  Workload shared = w;
  shared.model.shared_experts = 2;
  shared.model.shared_ffn = 64;
  EXPECT_GE(cuda_fp8_step_bytes(shared, 128) - cuda_fp8_step_bytes(w, 128), 2 * 2 * 3 * H * 64);
  Workload piped = w;
  piped.overlap = Overlap::kPipeline;
  piped.overlap_chunks = 2;
  EXPECT_GE(cuda_fp8_step_bytes(w, 128) - cuda_fp8_step_bytes(piped, 128), 128 * (H + F));
  Workload packed = w;
  packed.precision = Precision::kFp8Block;
  packed.dispatch_dtype = DispatchDtype::kFp8;
  Workload unpacked = packed;
  unpacked.dispatch_dtype = DispatchDtype::kBf16;
  EXPECT_GE(cuda_fp8_step_bytes(unpacked, 128) - cuda_fp8_step_bytes(packed, 128), 128 * H);
  // An absurd shape reads as too big, not as an overflowed size.
  Workload huge = w;
  huge.model.ffn = int64_t(1) << 40;
  EXPECT_EQ(cuda_fp8_step_bytes(huge, 128), INT64_MAX);
}

// The CUDA router and layout kernels' scratch is in the CUDA backend's estimate only (the CPU
// backend has none), and grows with the router's shape.
TEST(BackendChecks, CudaMemoryEstimateCountsTheRouterScratch) {
  Workload w = fp8_workload(8, 1);
  w.precision = Precision::kBf16;
  resolve_and_validate(w, 1);
  w.check = CheckMode::kOff;
  const StepMemory cuda = estimate_memory_need(w, 1, "cuda").step;
  EXPECT_EQ(cuda.kernel_scratch, cuda_kernel_scratch_bytes(w));
  EXPECT_GE(cuda.kernel_scratch, int64_t(router_grads_scratch(16, 128, 8).total));
  EXPECT_EQ(estimate_memory_need(w, 1, "cpu").step.kernel_scratch, 0);
  Workload wider = w;
  wider.model.experts = 16;
  EXPECT_GT(cuda_kernel_scratch_bytes(wider), cuda.kernel_scratch);
}

// The weights' FP8 buffer: every piece 256-byte aligned, in order, each large enough for its
// codes or scales and clear of the next, the last ending within the buffer's size.
TEST(BackendChecks, Fp8WeightsLayoutHoldsEveryPieceApart) {
  for (int64_t G : {1, 3, 8})
    for (auto [H, F] : {std::pair<int64_t, int64_t>{128, 64}, {7168, 2048}, {200, 72}}) {
      SCOPED_TRACE(std::to_string(G) + " experts, H " + std::to_string(H) + ", F " +
                   std::to_string(F));
      const Fp8WeightsLayout l = fp8_weights_layout(G, H, F);
      struct Piece {
        size_t at, bytes;
      };
      std::vector<Piece> pieces;
      for (auto [w, P, Q] :
           {std::tuple<Fp8WeightPieces, int64_t, int64_t>{l.in, H, 2 * F}, {l.out, F, H}}) {
        const size_t codes = size_t(G * P * Q), scales = size_t(weight_fp8_scales(G, P, Q)) * 4;
        pieces.insert(pieces.end(), {{w.stored, codes},
                                     {w.transposed, codes},
                                     {w.stored_scales, scales},
                                     {w.transposed_scales, scales}});
      }
      EXPECT_EQ(pieces.front().at, 0u);
      for (size_t i = 0; i < pieces.size(); ++i) {
        EXPECT_EQ(pieces[i].at % 256, 0u) << "piece " << i;
        const size_t end = pieces[i].at + pieces[i].bytes;
        EXPECT_LE(end, i + 1 < pieces.size() ? pieces[i + 1].at : l.bytes) << "piece " << i;
      }
      EXPECT_EQ(fp8_weights_bytes(G, H, F), l.bytes);
      EXPECT_LT(l.bytes - (pieces.back().at + pieces.back().bytes), 256u);
    }
}

// FP8 GEMMs run on cuBLASLt's loop or the grouped sm90 kernel: a method that has no FP8 path is
// refused, naming the methods that have one.
TEST(BackendChecks, CudaFp8TakesTheMethodsThatHaveAnFp8Path) {
  auto with = [](const char* precision, GemmMethod m) {
    Workload w = fp8_workload(8, 1);
    w.precision =
        precision == std::string("fp8_tensor") ? Precision::kFp8Tensor : Precision::kFp8Block;
    w.gemm.method = m;
    return user_error_of([&] { check_backend_supports("cuda", w); });
  };
  for (const char* p : {"fp8_tensor", "fp8_block"}) {
    SCOPED_TRACE(p);
    EXPECT_EQ(with(p, GemmMethod::kAuto), "(no UserError)");
    EXPECT_EQ(with(p, GemmMethod::kLtMultistream), "(no UserError)");
    EXPECT_EQ(with(p, GemmMethod::kGroupedSm90), "(no UserError)");
    const std::string batched = with(p, GemmMethod::kGroupedBatched);
    EXPECT_NE(batched.find("gemm.method"), std::string::npos) << batched;
  }
}

// The sync-free step (graph) reads the row counts on the GPU only: both recipes run there on the
// grouped kernel; cuBLASLt's per-expert calls are refused, naming the way out.
TEST(BackendChecks, CudaFp8InTheSyncFreeStepIsTheGroupedKernels) {
  for (Precision p : {Precision::kFp8Tensor, Precision::kFp8Block}) {
    Workload w = fp8_workload(8, 1);
    w.graph = true;
    w.precision = p;
    EXPECT_EQ(user_error_of([&] { check_backend_supports("cuda", w); }), "(no UserError)");
    w.gemm.method = GemmMethod::kLtMultistream;
    const std::string lt = user_error_of([&] { check_backend_supports("cuda", w); });
    EXPECT_NE(lt.find("gemm.method=grouped_sm90"), std::string::npos) << lt;
  }
}

// gemm.method_* are the CUDA backend's, as gemm.method is; the sync-free step takes only the
// grouped kernel for each GEMM, and FP8 no cuBLAS grouped call.
TEST(BackendChecks, PerGemmMethodsFollowGemmMethodsRules) {
  Workload w = fp8_workload(8, 1);
  w.precision = Precision::kBf16;
  w.gemm.method = GemmMethod::kGroupedSm90;
  w.gemm.methods[size_t(ExpertGemm::kDgradX)] = GemmMethod::kLtMultistream;
  EXPECT_EQ(user_error_of([&] { check_backend_supports("cuda", w); }), "(no UserError)");
  const std::string cpu = user_error_of([&] { check_backend_supports("cpu", w); });
  EXPECT_NE(cpu.find("gemm.method_*"), std::string::npos) << cpu;
  w.graph = true;
  const std::string graph = user_error_of([&] { check_backend_supports("cuda", w); });
  EXPECT_NE(graph.find("gemm.method_dgrad_x = lt_multistream"), std::string::npos) << graph;
  w.gemm.methods[size_t(ExpertGemm::kDgradX)] = GemmMethod::kGroupedSm90;
  EXPECT_EQ(user_error_of([&] { check_backend_supports("cuda", w); }), "(no UserError)");
  w.graph = false;
  w.precision = Precision::kFp8Block;
  w.gemm.methods[size_t(ExpertGemm::kWgradOut)] = GemmMethod::kGroupedBatched;
  const std::string fp8 = user_error_of([&] { check_backend_supports("cuda", w); });
  EXPECT_NE(fp8.find("gemm.method_wgrad_out"), std::string::npos) << fp8;
}

}  // namespace
}  // namespace moe::test
