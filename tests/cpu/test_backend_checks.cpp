// check_backend_supports: refusals a backend makes before any rank allocates, with a message
// that names the field and the fix. Runs without a GPU: it reads the workload only.
#include <gtest/gtest.h>

#include <string>

#include "app/backend.h"
#include "core/fp8.h"
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

}  // namespace
}  // namespace moe::test
