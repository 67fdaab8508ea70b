// overlap = pipeline on the CPU backend, one rank: with 1, 2 and 4 chunks it is overlap none, bit
// for bit (the CPU GEMM computes each row alone, and the weight gradients gather every chunk's
// rows into the unchunked step's order), with fp32 or bf16 expert gradients, and every tensor
// passes the float64 reference. A capacity applies per chunk, and the reference applies the same
// drops. The refusals of overlap_chunks name the key and fix.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/mesh.h"
#include "core/moe_layer.h"
#include "core/reference.h"
#include "core/routing_modes.h"
#include "core/workload.h"
#include "tests/common/cpu_layer.h"
#include "tests/common/small_workload.h"
#include "tests/common/user_error.h"

namespace moe {
namespace {

using test::user_error_of;

// A small workload with the aux and z losses, changed by `sets` (--set assignments).
Workload workload(const std::vector<std::string>& sets) { return test::small_workload(sets, 7); }

Workload pipelined(Workload w, int64_t chunks) {
  w.overlap = Overlap::kPipeline;
  w.overlap_chunks = chunks;
  resolve_and_validate(w, 1);
  return w;
}

// Step 1's results (step 0 is a warm-up that grows the buffers), and the lanes it used.
struct StepRun {
  StepOutputs o;
  LaneTimes lanes;
};

StepRun run(const Workload& w) {
  test::CpuLayer cpu(w);
  cpu.run(2);
  return {cpu.layer.download_outputs(), cpu.layer.lanes()};
}

// The tensors a step produces, by name.
std::vector<std::pair<std::string, const std::vector<float>*>> tensors(const StepOutputs& o) {
  std::vector<std::pair<std::string, const std::vector<float>*>> t = {{"out", &o.out},
                                                                      {"dx", &o.dx},
                                                                      {"dw_gate", &o.dw_gate},
                                                                      {"dw_in", &o.dw_in},
                                                                      {"dw_out", &o.dw_out}};
  if (!o.dw_sh_in.empty()) {
    t.push_back({"dw_sh_in", &o.dw_sh_in});
    t.push_back({"dw_sh_out", &o.dw_sh_out});
  }
  return t;
}

const std::vector<float>& tensor(const StepOutputs& o, const std::string& name) {
  for (const auto& [n, t] : tensors(o))
    if (n == name) return *t;
  ADD_FAILURE() << "no tensor " << name;
  return o.out;
}

// Every tensor within its tolerance of the float64 reference, the routing and drops agreeing.
void expect_passes_reference(const Workload& w, const StepOutputs& o) {
  const ReferenceResult ref = test::reference_of_step(w, o, 1);
  EXPECT_EQ(ref.routing_mismatches, 0);
  EXPECT_EQ(ref.drop_mismatches, 0);
  const std::vector<std::pair<std::string, const std::vector<double>*>> refs = {
      {"out", &ref.out},
      {"dx", &ref.dx},
      {"dw_gate", &ref.dw_gate},
      {"dw_in", &ref.dw_in},
      {"dw_out", &ref.dw_out},
      {"dw_sh_in", &ref.dw_sh_in},
      {"dw_sh_out", &ref.dw_sh_out}};
  for (const auto& [name, got] : tensors(o)) {
    const std::vector<double>* want = nullptr;
    for (const auto& [n, r] : refs)
      if (n == name) want = r;
    ASSERT_NE(want, nullptr) << name;
    const TensorCheck c = compare_tensor(name, got->data(), want->data(), int64_t(got->size()),
                                         tolerance_for(name, w.dtype), MPI_COMM_SELF);
    EXPECT_TRUE(c.pass) << name << " rel_l2 " << c.rel_l2 << " tol " << c.tol;
  }
}

void expect_pipeline_matches_none(const std::vector<std::string>& sets) {
  const Workload none = workload(sets);
  const StepRun plain = run(none);
  expect_passes_reference(none, plain.o);

  // One chunk: the same calls on the same rows, bit for bit.
  const StepRun one = run(pipelined(none, 1));
  for (const auto& [name, got] : tensors(one.o)) EXPECT_EQ(*got, tensor(plain.o, name)) << name;

  for (int64_t chunks : {2, 4}) {
    SCOPED_TRACE("overlap_chunks " + std::to_string(chunks));
    const Workload w = pipelined(none, chunks);
    const StepRun r = run(w);
    expect_passes_reference(w, r.o);
    EXPECT_EQ(r.o.idx, plain.o.idx);
    // Every chunk's rows in one weight-gradient GEMM, in the unchunked order: bit for bit.
    for (const auto& [name, got] : tensors(r.o)) EXPECT_EQ(*got, tensor(plain.o, name)) << name;
    // The dispatcher's directions ran on the side lane, the GEMMs on the main one (the CPU runs
    // them in turn: nothing hides anything).
    EXPECT_GT(r.lanes.busy_ms[kSideLane], 0);
    EXPECT_GT(r.lanes.busy_ms[kMainLane], 0);
    EXPECT_EQ(r.lanes.exposed_comm_ms, r.lanes.comm_ms);
  }
  EXPECT_EQ(plain.lanes.busy_ms[kSideLane], 0);
}

TEST(Pipeline, Bf16) { expect_pipeline_matches_none({}); }
TEST(Pipeline, Fp32) { expect_pipeline_matches_none({"dtype=fp32"}); }
TEST(Pipeline, Bf16Gradients) { expect_pipeline_matches_none({"expert_grad_dtype=bf16"}); }
TEST(Pipeline, SigmoidGroupsAlign) {
  expect_pipeline_matches_none({"align=8", "router.score=sigmoid", "router.groups=4",
                                "router.group_topk=2", "router.normalize_topk=true",
                                "router.expert_bias=true"});
}
TEST(Pipeline, SharedExperts) {
  expect_pipeline_matches_none({"model.shared_experts=2", "model.shared_ffn=24"});
}
TEST(Pipeline, Allgather) { expect_pipeline_matches_none({"dispatch=allgather"}); }

// Per chunk, the capacity is that of a rank with the chunk's tokens: the drops differ from
// overlap none's, and the reference, told the chunks, drops the same rows.
TEST(Pipeline, CapacityAppliesPerChunk) {
  for (const char* policy : {"probability", "position"}) {
    SCOPED_TRACE(policy);
    const Workload none = workload(
        {"capacity_factor=0.75", std::string("drop_policy=") + policy, "routing.mode=hot"});
    const Workload w = pipelined(none, 4);
    EXPECT_EQ(expert_capacity(w), 1);     // ceil(0.75 * 4 * 2 / 8)
    EXPECT_EQ(expert_capacity(none), 3);  // ceil(0.75 * 16 * 2 / 8)
    const StepRun r = run(w);
    expect_passes_reference(w, r.o);
    int64_t dropped = 0;
    for (uint8_t d : r.o.dropped) dropped += d;
    EXPECT_GT(dropped, 0);
  }
}

TEST(Pipeline, RefusalsNameTheKeyAndTheFix) {
  Workload w = workload({});
  w.overlap_chunks = 4;
  std::string msg = user_error_of([&] { resolve_and_validate(w, 1); });
  EXPECT_NE(msg.find("overlap_chunks = 4 is read only with overlap = \"pipeline\""),
            std::string::npos)
      << msg;
  w.overlap = Overlap::kPipeline;
  w.overlap_chunks = 3;
  msg = user_error_of([&] { resolve_and_validate(w, 1); });
  EXPECT_NE(msg.find("overlap_chunks = 3 does not divide tokens_per_rank = 16"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("one of 1, 2, 4, 8, 16"), std::string::npos) << msg;
  w.overlap_chunks = 65;
  msg = user_error_of([&] { resolve_and_validate(w, 1); });
  EXPECT_NE(msg.find("between 1 and 64"), std::string::npos) << msg;
  w.overlap_chunks = 2;
  EXPECT_NO_THROW(resolve_and_validate(w, 1));
}

}  // namespace
}  // namespace moe
