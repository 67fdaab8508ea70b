// The key table: the documented configuration table is the generated one, every key round-trips
// through --set, and the JSON reader refuses what it would otherwise take silently.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/workload.h"
#include "tests/common/user_error.h"

namespace moe {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

using test::user_error_of;

const std::string kModel = R"("model": {"hidden": 64, "ffn": 32, "experts": 8, "topk": 2},
                              "tokens_per_rank": 16)";

TEST(WorkloadKeys, DocumentedTableIsTheKeyTable) {
  const std::string doc = read_file(std::string(MOE_SOURCE_DIR) + "/docs/configuration.md");
  const std::string begin = "<!-- keys:begin -->\n", end = "<!-- keys:end -->";
  const size_t a = doc.find(begin), b = doc.find(end);
  ASSERT_NE(a, std::string::npos) << "docs/configuration.md lacks " << begin;
  ASSERT_NE(b, std::string::npos) << "docs/configuration.md lacks " << end;
  EXPECT_EQ(doc.substr(a + begin.size(), b - a - begin.size()), workload_keys_markdown())
      << "docs/configuration.md's key table differs from the program's: paste the output of "
         "`moebench keys` between the markers";
}

TEST(WorkloadKeys, TunablesAreKeys) {
  Workload w = workload_from_json_text("{" + kModel + "}", "t");
  EXPECT_EQ(w.overlap, Overlap::kNone);
  EXPECT_EQ(w.overlap_chunks, 2);
  EXPECT_EQ(w.gemm.method, GemmMethod::kAuto);
  EXPECT_EQ(w.gemm.streams, 4);
  EXPECT_EQ(w.gemm.algo, GemmAlgo::kAuto);
  EXPECT_EQ(w.gemm.sm90_cluster, 1);
  EXPECT_FALSE(w.gemm.sm90_fuse_swiglu);
  EXPECT_EQ(w.gemm.sm90_schedule, Sm90Schedule::kCooperative);
  EXPECT_FALSE(w.graph);
  for (const char* s :
       {"overlap=pipeline", "overlap_chunks=4", "gemm.method=grouped_batched", "gemm.streams=8",
        "gemm.sm90_cluster=2", "gemm.sm90_schedule=pingpong", "gemm.method_wgrad_in=grouped_sm90",
        "gemm.sm90_fuse_swiglu=true", "gemm.algo=exact", "graph=true"})
    apply_override(w, s);
  EXPECT_EQ(w.overlap, Overlap::kPipeline);
  EXPECT_EQ(w.overlap_chunks, 4);
  EXPECT_EQ(w.gemm.method, GemmMethod::kGroupedBatched);
  EXPECT_EQ(w.gemm.streams, 8);
  EXPECT_EQ(w.gemm.algo, GemmAlgo::kExact);
  EXPECT_EQ(w.gemm.sm90_cluster, 2);
  EXPECT_TRUE(w.gemm.sm90_fuse_swiglu);
  EXPECT_EQ(w.gemm.sm90_schedule, Sm90Schedule::kPingpong);
  EXPECT_EQ(w.gemm.methods[size_t(ExpertGemm::kWgradIn)], GemmMethod::kGroupedSm90);
  EXPECT_EQ(w.gemm.methods[size_t(ExpertGemm::kUp)], GemmMethod::kAuto);
  EXPECT_TRUE(w.graph);
  const nlohmann::json j = workload_to_json(w);
  EXPECT_EQ(j.at("graph"), true);
  EXPECT_EQ(j.at("overlap"), "pipeline");
  EXPECT_EQ(j.at("overlap_chunks"), 4);
  EXPECT_EQ(j.at("gemm").at("method"), "grouped_batched");
  EXPECT_EQ(j.at("gemm").at("streams"), 8);
  EXPECT_EQ(j.at("gemm").at("method_wgrad_in"), "grouped_sm90");
  // The per-GEMM methods and the grouped kernel's CTA limit are listed where they are set only.
  EXPECT_EQ(describe_how_keys(w),
            "expert_placement=contiguous overlap=pipeline overlap_chunks=4 "
            "gemm.method=grouped_batched gemm.streams=8 "
            "gemm.sm90_cluster=2 gemm.sm90_schedule=pingpong gemm.method_wgrad_in=grouped_sm90 "
            "gemm.sm90_fuse_swiglu=true gemm.algo=exact graph=true");
  apply_override(w, "gemm.sm90_ctas=100");
  EXPECT_EQ(w.gemm.sm90_ctas, 100);
  EXPECT_NE(describe_how_keys(w).find(" gemm.sm90_ctas=100 "), std::string::npos);
  // The JSON form reads back to the same workload.
  EXPECT_EQ(workload_to_json(workload_from_json_text(j.dump(), "j")), j);
  EXPECT_NE(user_error_of([&] {
              apply_override(w, "gemm.method=cutlass");
            }).find("expected one of \"auto\", \"lt_multistream\", \"grouped_batched\""),
            std::string::npos);
}

TEST(WorkloadKeys, WhatChangesTheWork) {
  for (const char* how : {"overlap", "overlap_chunks", "gemm.method", "gemm.streams", "gemm.algo",
                          "steps", "check", "name", "warmup", "reference", "roofline"})
    EXPECT_FALSE(workload_key_changes_work(how)) << how;
  for (const char* work : {"model.hidden", "router.score", "dtype", "expert_grad_dtype", "align",
                           "capacity_factor", "seed", "dispatch"})
    EXPECT_TRUE(workload_key_changes_work(work)) << work;
}

TEST(WorkloadKeys, DuplicateKeysAreRefused) {
  const std::string top = user_error_of(
      [] { workload_from_json_text("{" + kModel + R"(, "steps": 3, "steps": 5})", "d.json"); });
  EXPECT_NE(top.find("duplicate key 'steps' in d.json"), std::string::npos) << top;
  const std::string nested = user_error_of([] {
    workload_from_json_text(
        R"({"model": {"hidden": 64, "ffn": 32, "experts": 8, "topk": 2, "topk": 4},
            "tokens_per_rank": 16})",
        "d.json");
  });
  EXPECT_NE(nested.find("duplicate key 'model.topk' in d.json"), std::string::npos) << nested;
  // The same name in two different objects is no duplicate.
  EXPECT_NO_THROW(workload_from_json_text(
      "{" + kModel + R"(, "router": {"groups": 1}, "routing": {"mode": "learned"}})", "ok"));
}

TEST(WorkloadKeys, NumbersBeyondDoubleAreRefusedNamingTheFile) {
  const std::string msg = user_error_of([] {
    workload_from_json_text("{" + kModel + R"(, "router": {"scaling": 1e400}})", "n.json");
  });
  EXPECT_NE(msg.find("n.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1e400"), std::string::npos) << msg;
  EXPECT_NE(msg.find("finite"), std::string::npos) << msg;
}

TEST(WorkloadKeys, DeepNestingIsRefused) {
  const int depth = 100000;
  const std::string text = std::string(depth, '[') + std::string(depth, ']');
  const std::string msg = user_error_of([&] { workload_from_json_text(text, "deep.json"); });
  EXPECT_NE(msg.find("deep.json: JSON nested deeper than"), std::string::npos) << msg;
  std::string nested;
  for (int i = 0; i < 40; ++i) nested += "{\"a\":";
  nested += "1" + std::string(40, '}');
  EXPECT_NE(user_error_of([&] { workload_from_json_text(nested, "o.json"); }).find("deeper than"),
            std::string::npos);
}

TEST(WorkloadKeys, DirectoryAsConfigIsNamed) {
  const std::string dir = std::string(MOE_SOURCE_DIR) + "/configs";
  const std::string msg = user_error_of([&] { load_workload_file(dir); });
  EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir), std::string::npos) << msg;
}

}  // namespace
}  // namespace moe
