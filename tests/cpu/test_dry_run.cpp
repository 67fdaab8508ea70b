// The dry run's warnings: a cuda plan that outgrows the GPU it would run on is named, one that
// fits is not, and the CPU plan never compares with a GPU; FP8 with few rows per expert; a
// shared_ffn without shared experts.
#include <gtest/gtest.h>

#include <string>

#include "app/dry_run.h"
#include "core/workload.h"

namespace moe {
namespace {

bool mentions_gpu_memory(const nlohmann::json& plan) {
  for (const auto& w : plan["warnings"])
    if (w.get<std::string>().find("GiB of GPU memory") != std::string::npos) return true;
  return false;
}

TEST(DryRun, WarnsWhereTheGpuIsTooSmall) {
  Workload w = load_workload_file(std::string(MOE_SOURCE_DIR) + "/configs/bench/deepseek_v3.json");
  resolve_and_validate(w, 1);
  PlanHost host;
  host.gpu_memory_bytes = int64_t(80) << 30;
  // DeepSeek-V3 at EP 1 holds about 66 GiB: it fits 80 GiB, not 40.
  const nlohmann::json fits = dry_run_plan(w, 1, "cuda", host);
  EXPECT_FALSE(mentions_gpu_memory(fits)) << fits["warnings"].dump();
  EXPECT_EQ(fits["memory"]["gpu_total_bytes"], host.gpu_memory_bytes);
  host.gpu_memory_bytes = int64_t(40) << 30;
  EXPECT_TRUE(mentions_gpu_memory(dry_run_plan(w, 1, "cuda", host)));
  EXPECT_FALSE(mentions_gpu_memory(dry_run_plan(w, 1, "cpu", host)));
}

bool mentions_fp8_quantization(const nlohmann::json& plan) {
  for (const auto& w : plan["warnings"])
    if (w.get<std::string>().find("quantizes the rank's expert weights") != std::string::npos)
      return true;
  return false;
}

Workload bench(const std::string& name, const std::string& precision, int64_t ep) {
  Workload w = load_workload_file(std::string(MOE_SOURCE_DIR) + "/configs/bench/" + name);
  apply_override(w, "precision=" + precision);
  apply_override(w, "align=16");
  apply_override(w, "mesh.ep=" + std::to_string(ep));
  resolve_and_validate(w, int(ep));
  return w;
}

// FP8 where the rows per expert are few (DeepSeek-V3: 128 at EP 1, 512 at EP 4) is named, with
// the weights' bytes; bf16 there is not, nor FP8 with many rows (Mixtral-8x7B: 1024 at EP 1),
// nor FP8 with fp8_weights cached (the steps quantize no weights).
TEST(DryRun, WarnsWhereFp8WeightQuantizationOutweighsItsGemms) {
  PlanHost host;
  const nlohmann::json few =
      dry_run_plan(bench("deepseek_v3.json", "fp8_block", 1), 1, "cuda", host);
  EXPECT_TRUE(mentions_fp8_quantization(few)) << few["warnings"].dump();
  // 256 experts of 3 x 7168 x 2048 and one shared expert of 3 x 7168 x 2048: 4 bytes each.
  EXPECT_NE(few["warnings"].dump().find("42.2 GiB"), std::string::npos) << few["warnings"].dump();
  EXPECT_TRUE(mentions_fp8_quantization(
      dry_run_plan(bench("deepseek_v3.json", "fp8_tensor", 4), 4, "cuda", host)));
  EXPECT_FALSE(mentions_fp8_quantization(
      dry_run_plan(bench("deepseek_v3.json", "bf16", 1), 1, "cuda", host)));
  EXPECT_FALSE(mentions_fp8_quantization(
      dry_run_plan(bench("mixtral_8x7b.json", "fp8_tensor", 1), 1, "cuda", host)));
  Workload cached = bench("deepseek_v3.json", "fp8_block", 1);
  apply_override(cached, "fp8_weights=cached");
  resolve_and_validate(cached, 1);
  const nlohmann::json reused = dry_run_plan(cached, 1, "cuda", host);
  EXPECT_FALSE(mentions_fp8_quantization(reused)) << reused["warnings"].dump();
}

bool mentions_unused_shared_ffn(const nlohmann::json& plan) {
  for (const auto& w : plan["warnings"])
    if (w.get<std::string>().find("model.shared_ffn = 2048 has no effect: model.shared_experts = "
                                  "0") != std::string::npos)
      return true;
  return false;
}

// DeepSeek-V3 without its shared expert (an ablation) keeps its shared_ffn, which then does
// nothing: named. With the shared expert, or with no width set, nothing is said.
TEST(DryRun, WarnsWhereSharedFfnHasNoSharedExperts) {
  PlanHost host;
  Workload w = bench("deepseek_v3.json", "bf16", 1);
  EXPECT_FALSE(mentions_unused_shared_ffn(dry_run_plan(w, 1, "cpu", host)));
  apply_override(w, "model.shared_experts=0");
  resolve_and_validate(w, 1);
  const nlohmann::json ablated = dry_run_plan(w, 1, "cpu", host);
  EXPECT_TRUE(mentions_unused_shared_ffn(ablated)) << ablated["warnings"].dump();
  apply_override(w, "model.shared_ffn=0");
  resolve_and_validate(w, 1);
  EXPECT_FALSE(mentions_unused_shared_ffn(dry_run_plan(w, 1, "cpu", host)));
}

}  // namespace
}  // namespace moe
