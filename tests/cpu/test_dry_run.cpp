// The dry run's memory warnings: a cuda plan that outgrows the GPU it would run on is named, one
// that fits is not, and the CPU plan never compares with a GPU.
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

}  // namespace
}  // namespace moe
