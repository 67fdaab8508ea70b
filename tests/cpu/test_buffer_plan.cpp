// The buffer plan is what the step holds: a MoeLayer over the CPU backend, after a step with
// balanced routing, has allocated exactly the bytes the memory estimate predicts (the device
// counts every byte), so --dry-run and the run's memory check cannot drift from the code.
#include <gtest/gtest.h>

#include <string>

#include "core/buffer_plan.h"
#include "core/workload.h"
#include "tests/common/cpu_layer.h"

namespace moe {
namespace {

// Bytes the CPU device held at most over construction and two steps.
int64_t bytes_a_step_holds(const Workload& w) {
  test::CpuLayer cpu(w);
  cpu.run(2);
  return cpu.device.memory_high_water();
}

Workload balanced(const std::string& extra) {
  // routing.mode balanced: every expert gets T*K/E = 5 rows, so the ragged buffers hold what the
  // plan sizes for balanced routing; at align 4 each pads to 8, the plan's bound of
  // T*K + E_local * (align - 1) rows.
  Workload w = workload_from_json_text(
      R"({"model": {"hidden": 8, "ffn": 4, "experts": 4, "topk": 2}, "tokens_per_rank": 10,
          "routing": {"mode": "balanced"}, "check": "off", "roofline": false)" +
          extra + "}",
      "t");
  resolve_and_validate(w, 1);
  return w;
}

TEST(BufferPlan, EstimateIsWhatTheStepAllocates) {
  for (const std::string& extra :
       {std::string(), std::string(R"(, "align": 4)"), std::string(R"(, "dtype": "fp32")"),
        std::string(R"(, "router": {"expert_bias": true}, "expert_grad_dtype": "bf16")"),
        std::string(R"(, "dispatch": "allgather")"),
        std::string(R"(, "dispatch": "allgather", "align": 4)"),
        std::string(R"(, "dispatch": "alltoall_dedup", "align": 4)"),
        // One dispatcher per chunk, each chunk's rows from a row multiple of 128 on.
        std::string(R"(, "overlap": "pipeline", "overlap_chunks": 2, "align": 4)"),
        std::string(R"(, "overlap": "pipeline", "overlap_chunks": 5, "dispatch": "allgather")"),
        std::string(
            R"(, "overlap": "pipeline", "overlap_chunks": 2, "dispatch": "alltoall_dedup")"),
        // The sync-free step's buffers at their bound, without headroom.
        std::string(R"(, "graph": true, "align": 4, "warmup": 2)"),
        std::string(
            R"(, "graph": true, "dispatch": "allgather", "overlap": "pipeline", "warmup": 2)")}) {
    SCOPED_TRACE(extra);
    const Workload w = balanced(extra);
    EXPECT_EQ(bytes_a_step_holds(w), estimate_rank_bytes(w, 1));
  }
}

TEST(BufferPlan, SharedExpertsAreInTheEstimate) {
  for (const std::string& extra :
       {std::string(), std::string(R"(, "expert_grad_dtype": "bf16", "dtype": "bf16")")}) {
    SCOPED_TRACE(extra);
    Workload w = balanced(extra);
    const int64_t without = estimate_rank_bytes(w, 1);
    apply_override(w, "model.shared_experts=2");
    apply_override(w, "model.shared_ffn=6");
    EXPECT_EQ(bytes_a_step_holds(w), estimate_rank_bytes(w, 1));
    EXPECT_GT(estimate_rank_bytes(w, 1), without);
  }
}

TEST(BufferPlan, ForcedRoutingHoldsItsIndices) {
  const Workload w = balanced("");
  const BufferPlan plan = plan_step_buffers(w, 4, 4);
  EXPECT_EQ(plan.num_token_topk, 4);  // idx, p, dp and the forced indices
  Workload learned = w;
  learned.routing.mode = RoutingMode::kLearned;
  EXPECT_EQ(plan_step_buffers(learned, 4, 4).num_token_topk, 3);
}

TEST(BufferPlan, GrowthLeavesAQuarterOfHeadroom) {
  EXPECT_EQ(grown_bytes(400), 500);
  EXPECT_EQ(grown_bytes(3), 3);
  const Workload w = balanced("");
  const BufferPlan plan = plan_step_buffers(w, 4, 4);
  // 20 rows: 4 buffers of 20 x 8 floats, 2 of 20 x 8, 2 of 20 x 4, each with its headroom.
  EXPECT_EQ(plan.ragged_bytes(20),
            4 * grown_bytes(20 * 32) + 2 * grown_bytes(20 * 32) + 2 * grown_bytes(20 * 16));
}

// graph: the sync-free step sizes its ragged buffers once, for the most rows any routing gives
// (every row the EP group routes, each expert padded), and never grows them: no headroom.
TEST(BufferPlan, SyncFreeBuffersHoldTheBoundExactly) {
  Workload w = balanced(R"(, "graph": true, "align": 4, "warmup": 2)");
  const BufferPlan plan = plan_step_buffers(w, 4, 4);
  EXPECT_TRUE(plan.ragged_exact);
  EXPECT_EQ(plan.planned_rows, expert_rows_bound(1, 10, 2, 4, 4));
  EXPECT_EQ(plan.planned_rows, 10 * 2 + 4 * 3);
  EXPECT_EQ(plan.ragged_bytes(20), 4 * 20 * 32 + 2 * 20 * 32 + 2 * 20 * 16);
  // At ep 2 the bound is the group's rows: twice a rank's.
  EXPECT_EQ(expert_rows_bound(2, 10, 2, 2, 4), 2 * 10 * 2 + 2 * 3);
}

}  // namespace
}  // namespace moe
