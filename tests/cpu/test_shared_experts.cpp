// The shared experts' keys, buffer plan, costs and sums (the step, the reference and the fake-layer
// order have their own tests: test_buffer_plan, test_reference, test_moe_layer_fake).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/buffer_plan.h"
#include "core/cost_model.h"
#include "core/mesh.h"
#include "core/moe_layer.h"
#include "core/workload.h"
#include "kernels/cpu/shared_sum.h"
#include "tests/common/user_error.h"

namespace moe {
namespace {

Workload shared_workload(const std::string& shared, int world = 1) {
  Workload w =
      workload_from_json_text(R"({"model": {"hidden": 16, "ffn": 8, "experts": 4, "topk": 2)" +
                                  shared + R"(}, "tokens_per_rank": 6})",
                              "t");
  resolve_and_validate(w, world);
  return w;
}

TEST(SharedExperts, KeysDefaultToNoneAndAreValidated) {
  const Workload none = shared_workload("");
  EXPECT_EQ(none.model.shared_experts, 0);
  EXPECT_EQ(none.model.shared_ffn, 0);
  const Workload one = shared_workload(R"(, "shared_experts": 1, "shared_ffn": 24)");
  EXPECT_EQ(one.model.shared_experts, 1);
  EXPECT_EQ(one.model.shared_ffn, 24);
  // A width without shared experts is ignored, not refused (--set model.shared_experts=0 turns
  // a model's shared experts off).
  EXPECT_EQ(shared_workload(R"(, "shared_ffn": 24)").model.shared_experts, 0);

  std::string msg = test::user_error_of([] { shared_workload(R"(, "shared_experts": 1)"); });
  EXPECT_NE(msg.find("model.shared_ffn"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--set model.shared_ffn="), std::string::npos) << msg;
  msg = test::user_error_of([] { shared_workload(R"(, "shared_experts": -1)"); });
  EXPECT_NE(msg.find("model.shared_experts = -1"), std::string::npos) << msg;
  msg = test::user_error_of([] { shared_workload(R"(, "shared_experts": 65, "shared_ffn": 8)"); });
  EXPECT_NE(msg.find("between 0 (none) and 64"), std::string::npos) << msg;
  msg = test::user_error_of([] { shared_workload(R"(, "shared_ffn": -8)"); });
  EXPECT_NE(msg.find("model.shared_ffn = -8"), std::string::npos) << msg;
}

TEST(SharedExperts, OverridesAndJsonRoundTrip) {
  Workload w = shared_workload("");
  apply_override(w, "model.shared_experts=2");
  apply_override(w, "model.shared_ffn=12");
  const nlohmann::json j = workload_to_json(w);
  EXPECT_EQ(j["model"]["shared_experts"], 2);
  EXPECT_EQ(j["model"]["shared_ffn"], 12);
  EXPECT_TRUE(workload_key_changes_work("model.shared_experts"));
  EXPECT_TRUE(workload_key_changes_work("model.shared_ffn"));
}

// A shard is ep parts of 1/world: the world's reduce-scatter and the EP group's all-gather of the
// gradient then land on each rank's FSDP shard.
TEST(SharedExperts, PlanSplitsTheWeightsIntoWorldParts) {
  Workload w = shared_workload(R"(, "shared_experts": 1, "shared_ffn": 5)", 8);
  w.mesh.ep = 4;
  w.mesh.fsdp = 2;
  const SharedBuffers p = plan_step_buffers(w, 2, 4).shared;
  const int64_t n_in = 16 * 2 * 5, n_out = 5 * 16;  // 160, 80
  EXPECT_EQ(p.part_in_elems, n_in / 8);
  EXPECT_EQ(p.part_out_elems, n_out / 8);
  EXPECT_EQ(p.shard_in_elems, 4 * p.part_in_elems);
  EXPECT_EQ(p.w_in_shard, 2 * p.shard_in_elems);
  EXPECT_EQ(p.w_in_full, 2 * 2 * p.shard_in_elems);  // fsdp 2
  EXPECT_EQ(p.dw_in_full, 4 * 8 * p.part_in_elems);
  EXPECT_EQ(p.dw_in_shard, 4 * p.shard_in_elems);
  EXPECT_EQ(p.dw_in_part, 4 * p.part_in_elems);
  EXPECT_EQ(p.h, 2 * 6 * 2 * 5);
  EXPECT_EQ(p.y, 2 * 6 * 16);
  // 81 elements over 8 ranks: parts of 11, padded.
  w.model.shared_ffn = 81;
  w.model.hidden = 1;
  EXPECT_EQ(plan_step_buffers(w, 2, 4).shared.part_out_elems, 11);
  // Without shared experts: nothing.
  EXPECT_EQ(plan_step_buffers(shared_workload(""), 2, 4).shared.bytes(), 0);
}

TEST(SharedExperts, ModelFlopsAndPhaseCostsCountThem) {
  const Workload w = shared_workload(R"(, "shared_experts": 2, "shared_ffn": 12)");
  const double N = 6, rows = N * 2;
  const double routed = 18 * rows * 16 * 8 + 6 * N * 16 * 4;
  EXPECT_DOUBLE_EQ(model_flops_per_step(w.model, N, rows), routed + 18 * N * 2 * 12 * 16);
  Workload none = w;
  none.model.shared_experts = 0;  // the width alone counts nothing
  EXPECT_DOUBLE_EQ(model_flops_per_step(none.model, N, rows), routed);
  const Mesh m = make_mesh(1, 0, 1, 1, 4);
  const std::vector<PhaseCost> c = phase_costs(w, m, 2, 4, rows);
  EXPECT_DOUBLE_EQ(c[kSharedFwd].flops, 6 * N * 16 * 2 * 12);
  EXPECT_DOUBLE_EQ(c[kSharedBwd].flops, 12 * N * 16 * 2 * 12);
  EXPECT_GT(c[kSharedBwd].mem_bytes, c[kSharedFwd].mem_bytes);
  EXPECT_EQ(phase_costs(none, m, 2, 4, rows)[kSharedFwd].flops, 0);
}

// The sums in their fixed order: the stored value first, then each shared expert; out rounded
// once to the storage dtype.
TEST(SharedExperts, SumsAddTheStoredValuesThenRoundOnce) {
  const int64_t S = 2, n = 3;
  const std::vector<float> rows = {1.0f, 2.0f, -1.0f, 0.00390625f, 0.5f, 1.0f};  // [S, n]
  std::vector<float> out = {256.0f, 0.25f, 1.0f};
  cpu::shared_sum_out(rows.data(), S, n, DType::kBf16, out.data());
  EXPECT_EQ(out[0], round_to_bf16(256.0f + 1.0f + 0.00390625f));  // 257.0039 -> 258 in bf16
  EXPECT_EQ(out[1], 2.75f);
  EXPECT_EQ(out[2], 1.0f);
  std::vector<float> acc = {256.0f, 0.25f, 1.0f};
  cpu::shared_sum_dx(rows.data(), S, n, acc.data());
  EXPECT_EQ(acc[0], 256.0f + 1.0f + 0.00390625f);  // fp32: no rounding to bf16
  EXPECT_EQ(acc[2], 1.0f);
}

}  // namespace
}  // namespace moe
