// The FP8 expert GEMMs (precision fp8_tensor, fp8_block) in a whole CPU step, one rank, against
// the float64 reference that quantizes the same operands: every tensor lands near the
// storage-rounding floor (MATH.md: about 2e-3), far inside the tolerances. And the check can
// fail: the same step against the other recipe, against no quantization, or against a reference
// that takes the wrong rows as one operand (a pipelined step's forward as one GEMM) misses them.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/fp8_scales.h"
#include "core/moe_layer.h"
#include "core/reference.h"
#include "core/workload.h"
#include "tests/common/cpu_layer.h"
#include "tests/common/small_workload.h"

namespace moe {
namespace {

// Two 128-wide blocks along H, a partial one along F and F_sh, and experts with more than 128
// rows, so that every kind of block (1 x 128, 128 x 1, 128 x 128, partial) is met.
Workload fp8_workload(const std::string& precision, const std::vector<std::string>& more = {}) {
  std::vector<std::string> sets = {"model.hidden=256",       "model.ffn=160",
                                   "model.experts=4",        "tokens_per_rank=320",
                                   "precision=" + precision, "model.shared_experts=1",
                                   "model.shared_ffn=96"};
  sets.insert(sets.end(), more.begin(), more.end());
  return test::small_workload(sets, 11);
}

StepOutputs run_step(const Workload& w) {
  test::CpuLayer cpu(w);
  cpu.run(2);
  return cpu.layer.download_outputs();
}

ReferenceResult reference_of(const Workload& w, const StepOutputs& o) {
  return test::reference_of_step(w, o, 1);
}

// rel_l2 of each expert-path tensor against ref, by name.
std::vector<std::pair<std::string, double>> errors(const StepOutputs& o,
                                                   const ReferenceResult& ref) {
  const std::vector<std::tuple<std::string, const std::vector<float>*, const std::vector<double>*>>
      t = {{"out", &o.out, &ref.out},
           {"dx", &o.dx, &ref.dx},
           {"dw_in", &o.dw_in, &ref.dw_in},
           {"dw_out", &o.dw_out, &ref.dw_out},
           {"dw_sh_in", &o.dw_sh_in, &ref.dw_sh_in},
           {"dw_sh_out", &o.dw_sh_out, &ref.dw_sh_out}};
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [name, got, want] : t) {
    EXPECT_EQ(got->size(), want->size()) << name;
    const TensorCheck c =
        compare_tensor(name, got->data(), want->data(), int64_t(got->size()), 1.0, MPI_COMM_SELF);
    out.push_back({name, c.rel_l2});
  }
  return out;
}

class Fp8Step : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp8Step, MatchesTheQuantizedReferenceAndNotTheOthers) {
  const std::string precision = GetParam();
  const Workload w = fp8_workload(precision);
  const StepOutputs o = run_step(w);
  const ReferenceResult ref = reference_of(w, o);
  EXPECT_EQ(ref.routing_mismatches, 0);
  for (const auto& [name, e] : errors(o, ref)) {
    EXPECT_LT(e, tolerance_for(name, w.dtype)) << name;
    EXPECT_LT(e, 5e-3) << name << ": far above the storage-rounding floor";
  }
  // A backend that skipped the quantization, or used the other recipe, fails the check.
  const std::string other = precision == "fp8_block" ? "fp8_tensor" : "fp8_block";
  for (const std::string& wrong : {std::string("bf16"), other}) {
    const ReferenceResult r = reference_of(fp8_workload(wrong), o);
    for (const auto& [name, e] : errors(o, r))
      EXPECT_GT(e, tolerance_for(name, w.dtype)) << name << " against " << wrong;
  }
}

// A pipelined step's chunks are operands of their own in the forward and the data gradients; the
// weight gradients gather every chunk's rows into one GEMM per expert, in the unchunked step's
// order (core/moe_layer.cpp). So fp8_block, whose forward and data-gradient blocks lie along a
// row, is the unchunked step bit for bit (the weight gradients' 128-row blocks are its blocks),
// while fp8_tensor's chunks have scales of their own, which the unchunked step's reference misses.
TEST_P(Fp8Step, PipelineChunksAreOperandsUpToTheWeightGradients) {
  const std::string precision = GetParam();
  const Workload w = fp8_workload(precision, {"overlap=pipeline", "overlap_chunks=2"});
  const StepOutputs o = run_step(w);
  for (const auto& [name, e] : errors(o, reference_of(w, o))) EXPECT_LT(e, 5e-3) << name;
  if (precision == "fp8_block") {
    const StepOutputs whole = run_step(fp8_workload(precision));
    EXPECT_EQ(o.out, whole.out);
    EXPECT_EQ(o.dx, whole.dx);
    EXPECT_EQ(o.dw_in, whole.dw_in);
    EXPECT_EQ(o.dw_out, whole.dw_out);
    return;
  }
  // The reported scales are the chunks' operands', which this reference does not have.
  StepOutputs unreported = o;
  unreported.fp8_scales.clear();
  for (const auto& [name, e] : errors(o, reference_of(fp8_workload(precision), unreported))) {
    if (name == "out" || name == "dx") {
      EXPECT_GT(e, tolerance_for(name, w.dtype)) << name;
    }
  }
}

// dispatch_dtype fp8: x reaches the experts as its 1 x 128 quantization, which the up projection
// would have made of it anyway, so the forward, the data gradients and dw_out are fp8_block's
// bit for bit; w_in's gradient takes those rows back in bf16 (docs/layer.md), which the reference
// that knows it matches and the one that does not misses.
TEST(Fp8Dispatch, ChangesOnlyTheGradientOfWIn) {
  for (const char* overlap : {"none", "pipeline"}) {
    SCOPED_TRACE(overlap);
    const std::vector<std::string> more = {std::string("overlap=") + overlap};
    std::vector<std::string> fp8_more = more;
    fp8_more.push_back("dispatch_dtype=fp8");
    const Workload w = fp8_workload("fp8_block", fp8_more);
    const StepOutputs o = run_step(w);
    for (const auto& [name, e] : errors(o, reference_of(w, o))) EXPECT_LT(e, 5e-3) << name;
    const Workload plain = fp8_workload("fp8_block", more);
    const StepOutputs p = run_step(plain);
    EXPECT_EQ(o.out, p.out);
    EXPECT_EQ(o.dx, p.dx);
    EXPECT_EQ(o.dw_out, p.dw_out);
    EXPECT_EQ(o.dw_sh_in, p.dw_sh_in);
    EXPECT_NE(o.dw_in, p.dw_in);
    for (const auto& [name, e] : errors(o, reference_of(plain, o))) {
      if (name == "dw_in")
        EXPECT_GT(e, tolerance_for(name, w.dtype)) << name;
      else
        EXPECT_LT(e, 5e-3) << name;
    }
  }
}

// fp8_tensor's scales (core/fp8_scales.h): the CPU backend reports the ones its GEMMs took,
// the reference's own (the same values), and none is taken; a reported scale a near tie away is
// taken, once, and moves the reference's result; one further away is not, nor in fp8_block.
TEST(Fp8ScaleTies, NearTieScalesAreTakenOthersNot) {
  for (const char* overlap : {"none", "pipeline"}) {
    SCOPED_TRACE(overlap);
    const Workload w = fp8_workload("fp8_tensor", {std::string("overlap=") + overlap});
    StepOutputs o = run_step(w);
    const int64_t E = w.model.experts;
    ASSERT_EQ(int64_t(o.fp8_scales.size()), step_chunks(w) * kNumFp8Computed * E);
    const ReferenceResult own = reference_of(w, o);
    EXPECT_EQ(own.fp8_scales_reported, int64_t(o.fp8_scales.size()));  // every expert has rows
    EXPECT_EQ(own.fp8_scales_adopted, 0);
    for (const auto& [name, e] : errors(o, own)) EXPECT_LT(e, 5e-3) << name;

    // Chunk 0: expert 1's a a near tie above, expert 2's dh 3% above.
    o.fp8_scales[size_t(int64_t(Fp8Computed::kA) * E + 1)] *= 1.0f + 1.0f / 128;
    o.fp8_scales[size_t(int64_t(Fp8Computed::kDh) * E + 2)] *= 1.03f;
    const ReferenceResult moved = reference_of(w, o);
    EXPECT_EQ(moved.fp8_scales_adopted, 1);
    EXPECT_NEAR(moved.fp8_scale_adopted_max_rel, 1.0 / 128, 1e-6);
    EXPECT_NE(moved.out, own.out);  // a's codes feed the down projection
    EXPECT_EQ(moved.dw_gate.size(), own.dw_gate.size());
  }
  // The rule alone.
  EXPECT_TRUE(fp8_scale_near_tie(1.0f, 1.0f + kFp8ScaleNearTie));
  EXPECT_TRUE(fp8_scale_near_tie(1.0f, 1.0f - kFp8ScaleNearTie));
  EXPECT_FALSE(fp8_scale_near_tie(1.0f, 1.02f));
  EXPECT_FALSE(fp8_scale_near_tie(1.0f, 0.0f));
  // fp8_block reports nothing: its scales are per block of 128.
  EXPECT_TRUE(run_step(fp8_workload("fp8_block")).fp8_scales.empty());
}

INSTANTIATE_TEST_SUITE_P(Recipes, Fp8Step, ::testing::Values("fp8_tensor", "fp8_block"));

}  // namespace
}  // namespace moe
