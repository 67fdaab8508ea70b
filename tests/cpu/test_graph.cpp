// graph = true on the CPU backend, one rank: the sync-free step (counts left on the device,
// buffers at their bound, the expert FFN reading only the device offsets) computes what the
// step that copies the counts to the host computes, bit for bit, over the layouts that move rows
// differently (align's padding and regroups, a capacity's drops, the pipeline's chunks, shared
// experts, the all-gather dispatcher's blocks); it never waits for the device, where the other step
// waits once per dispatcher; and its traffic, counted after the step, is the same. The refusals
// name the key and the fix.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/moe_layer.h"
#include "core/workload.h"
#include "tests/common/cpu_layer.h"
#include "tests/common/small_workload.h"
#include "tests/common/user_error.h"

namespace moe {
namespace {

using test::user_error_of;

Workload workload(const std::vector<std::string>& sets) { return test::small_workload(sets, 11); }

struct StepsRun {
  StepOutputs o;
  StepTraffic traffic;
  std::vector<int64_t> waits;  // per step
};

// Three steps (the graph's capture would be the second); the last one's results.
StepsRun run(Workload w, bool graph) {
  w.graph = graph;
  test::CpuLayer cpu(w);
  StepsRun r;
  std::vector<double> ms;
  for (int64_t step = 0; step < 3; ++step) {
    if (graph && step == 1) cpu.layer.capture_next_step();
    cpu.layer.load_step_inputs(step);
    cpu.layer.run_step(ms);
    r.waits.push_back(cpu.layer.host_waits());
  }
  EXPECT_FALSE(cpu.layer.replaying());  // the CPU cannot capture: every step was issued
  r.traffic = cpu.layer.traffic();
  r.o = cpu.layer.download_outputs();
  return r;
}

// The sync-free run, for what a case must have exercised.
StepsRun expect_sync_free_step_is_the_step(const std::vector<std::string>& sets) {
  const Workload w = workload(sets);
  const StepsRun issued = run(w, false), sync_free = run(w, true);
  const std::pair<const char*, const std::vector<float>*> tensors[][2] = {
      {{"out", &issued.o.out}, {"out", &sync_free.o.out}},
      {{"dx", &issued.o.dx}, {"dx", &sync_free.o.dx}},
      {{"dw_gate", &issued.o.dw_gate}, {"dw_gate", &sync_free.o.dw_gate}},
      {{"dw_in", &issued.o.dw_in}, {"dw_in", &sync_free.o.dw_in}},
      {{"dw_out", &issued.o.dw_out}, {"dw_out", &sync_free.o.dw_out}},
      {{"dw_sh_in", &issued.o.dw_sh_in}, {"dw_sh_in", &sync_free.o.dw_sh_in}}};
  for (const auto& t : tensors) {
    SCOPED_TRACE(t[0].first);
    EXPECT_EQ(t[0].second->size(), t[1].second->size());
    EXPECT_TRUE(*t[0].second == *t[1].second) << "the sync-free step's results differ";
  }
  EXPECT_EQ(issued.o.idx, sync_free.o.idx);
  EXPECT_EQ(issued.o.dropped, sync_free.o.dropped);
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(sync_free.waits[s], 0) << "step " << s;
    // One copy of the counts per chunk's dispatcher, and with chunks one of the weight
    // gradients' merged offsets.
    const int64_t chunks = step_chunks(w);
    EXPECT_EQ(issued.waits[s], chunks + (chunks > 1 ? 1 : 0)) << "step " << s;
  }
  EXPECT_EQ(issued.traffic.rows_received, sync_free.traffic.rows_received);
  EXPECT_EQ(issued.traffic.rows_dropped, sync_free.traffic.rows_dropped);
  EXPECT_EQ(issued.traffic.rows_padded, sync_free.traffic.rows_padded);
  EXPECT_EQ(issued.traffic.rows_to_others, sync_free.traffic.rows_to_others);
  return sync_free;
}

TEST(Graph, SyncFreeStepIsTheStep) { expect_sync_free_step_is_the_step({}); }
TEST(Graph, Fp32) { expect_sync_free_step_is_the_step({"dtype=fp32"}); }
TEST(Graph, AlignRegroupsAndPads) {
  EXPECT_GT(expect_sync_free_step_is_the_step({"align=16"}).traffic.rows_padded, 0);
}
TEST(Graph, CapacityDrops) {
  EXPECT_GT(expect_sync_free_step_is_the_step({"capacity_factor=0.5", "routing.mode=powerlaw"})
                .traffic.rows_dropped,
            0);
}
TEST(Graph, PipelineChunksAndSharedExperts) {
  const StepsRun r =
      expect_sync_free_step_is_the_step({"overlap=pipeline", "overlap_chunks=4", "align=8",
                                         "model.shared_experts=1", "model.shared_ffn=24"});
  EXPECT_GT(r.traffic.rows_padded, 0);
  EXPECT_FALSE(r.o.dw_sh_in.empty());
}

TEST(Graph, Allgather) {
  const StepsRun r = expect_sync_free_step_is_the_step({"dispatch=allgather", "align=16"});
  EXPECT_GT(r.traffic.rows_padded, 0);
}
TEST(Graph, AllgatherPipelineCapacity) {
  expect_sync_free_step_is_the_step({"dispatch=allgather", "overlap=pipeline", "overlap_chunks=2",
                                     "capacity_factor=0.75", "align=4"});
}

TEST(Graph, RefusalsNameTheKeyAndTheFix) {
  Workload w = workload({"graph=true"});
  w.mesh.ep = 2;
  std::string msg = user_error_of([&] { resolve_and_validate(w, 2); });
  EXPECT_NE(msg.find("set dispatch=nvlink or allgather (fixed sizes), or mesh.ep=1, or "
                     "graph=false"),
            std::string::npos)
      << msg;
  w.dispatch = DispatchKind::kAllgather;
  EXPECT_NO_THROW(resolve_and_validate(w, 2));
  w.dispatch = DispatchKind::kNvlink;
  EXPECT_NO_THROW(resolve_and_validate(w, 2));
  w.mesh.ep = 1;
  w.mesh.fsdp = 2;
  w.dispatch = DispatchKind::kAlltoall;
  EXPECT_NO_THROW(resolve_and_validate(w, 2));
  // alltoall_dedup sizes its all-to-all on the host at ep > 1; at ep 1 it is alltoall's path.
  w.dispatch = DispatchKind::kAlltoallDedup;
  EXPECT_NO_THROW(resolve_and_validate(w, 2));
  w.mesh.ep = 2;
  w.mesh.fsdp = 1;
  msg = user_error_of([&] { resolve_and_validate(w, 2); });
  EXPECT_NE(msg.find("dispatch = \"alltoall_dedup\" takes its all-to-all's sizes from counts on "
                     "the host: set dispatch=nvlink or allgather (fixed sizes), or mesh.ep=1, or "
                     "graph=false"),
            std::string::npos)
      << msg;
  w = workload({"graph=true"});
  w.warmup = 1;
  msg = user_error_of([&] { resolve_and_validate(w, 1); });
  EXPECT_NE(msg.find("set warmup to 2 or more (got 1)"), std::string::npos) << msg;
}

}  // namespace
}  // namespace moe
