// Workload config: parsing, --set overrides, mesh resolution, validation and the memory estimate.
// Every error test checks that the message names the key, since that is what the user acts on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/workload.h"

namespace moe {
namespace {

// Passes when fn throws a UserError whose message contains every piece; prints the message
// otherwise, so a failing test shows what the user would have seen.
::testing::AssertionResult ThrowsUserError(const std::function<void()>& fn,
                                           const std::vector<std::string>& pieces) {
  try {
    fn();
  } catch (const UserError& e) {
    const std::string msg = e.what();
    for (const std::string& p : pieces)
      if (msg.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks '" << p << "': " << msg;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-user error: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

const char* kMinimal = R"({"model": {"hidden": 64, "ffn": 32, "experts": 8, "topk": 2},
                           "tokens_per_rank": 16})";

Workload minimal() { return workload_from_json_text(kMinimal, "test.json"); }

// kMinimal with one more top-level entry, e.g. with(R"("steps": 3)").
std::string with(const std::string& entry) {
  return R"({"model": {"hidden": 64, "ffn": 32, "experts": 8, "topk": 2},
             "tokens_per_rank": 16, )" +
         entry + "}";
}

// The minimal workload with some --set overrides, validated on `world` ranks.
void validate_with(const std::vector<std::string>& sets, int world = 1) {
  Workload w = minimal();
  for (const std::string& s : sets) apply_override(w, s);
  resolve_and_validate(w, world);
}

// ---- Parsing ----

TEST(WorkloadParse, FullConfig) {
  Workload w = workload_from_json_text(R"({
    "name": "full",
    "model": {"hidden": 128, "ffn": 96, "experts": 16, "topk": 4},
    "router": {"score": "softmax", "softmax_after_topk": true, "normalize_topk": true,
               "scaling": 2.5, "groups": 4, "group_topk": 2, "expert_bias": true,
               "aux_coeff": 0.01, "z_coeff": 0.001},
    "tokens_per_rank": 64,
    "mesh": {"ep": 4, "fsdp": 2},
    "dtype": "fp32",
    "dispatch": "alltoall",
    "steps": 7,
    "warmup": 0,
    "seed": 18446744073709551615,
    "check": "every",
    "roofline": false
  })",
                                       "full.json");
  EXPECT_EQ(w.name, "full");
  EXPECT_EQ(w.model.hidden, 128);
  EXPECT_EQ(w.model.ffn, 96);
  EXPECT_EQ(w.model.experts, 16);
  EXPECT_EQ(w.model.topk, 4);
  EXPECT_STREQ(name_of(w.router.score), "softmax");
  EXPECT_TRUE(w.router.softmax_after_topk);
  EXPECT_TRUE(w.router.normalize_topk);
  EXPECT_DOUBLE_EQ(w.router.scaling, 2.5);
  EXPECT_EQ(w.router.groups, 4);
  EXPECT_EQ(w.router.group_topk, 2);
  EXPECT_TRUE(w.router.expert_bias);
  EXPECT_DOUBLE_EQ(w.router.aux_coeff, 0.01);
  EXPECT_DOUBLE_EQ(w.router.z_coeff, 0.001);
  EXPECT_EQ(w.tokens_per_rank, 64);
  EXPECT_EQ(w.mesh.ep, 4);
  EXPECT_EQ(w.mesh.fsdp, 2);
  EXPECT_EQ(w.dtype, DType::kFp32);
  EXPECT_STREQ(name_of(w.dispatch), "alltoall");
  EXPECT_EQ(w.steps, 7);
  EXPECT_EQ(w.warmup, 0);
  EXPECT_EQ(w.seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(w.check, CheckMode::kEvery);
  EXPECT_FALSE(w.roofline);
  resolve_and_validate(w, 8);
}

TEST(WorkloadParse, DefaultsForEveryOptionalKey) {
  Workload w = minimal();
  Workload d;  // the header's defaults
  EXPECT_EQ(w.name, d.name);
  EXPECT_STREQ(name_of(w.router.score), "softmax");
  EXPECT_FALSE(w.router.softmax_after_topk);
  EXPECT_FALSE(w.router.normalize_topk);
  EXPECT_DOUBLE_EQ(w.router.scaling, 1.0);
  EXPECT_EQ(w.router.groups, 1);
  EXPECT_EQ(w.router.group_topk, 1);
  EXPECT_FALSE(w.router.expert_bias);
  EXPECT_EQ(w.router.aux_coeff, 0.0);
  EXPECT_EQ(w.router.z_coeff, 0.0);
  EXPECT_EQ(w.mesh.ep, 0);  // auto
  EXPECT_EQ(w.mesh.fsdp, 0);
  EXPECT_EQ(w.dtype, DType::kBf16);
  EXPECT_STREQ(name_of(w.dispatch), "alltoall");
  EXPECT_EQ(w.steps, d.steps);
  EXPECT_EQ(w.warmup, d.warmup);
  EXPECT_EQ(w.seed, d.seed);
  EXPECT_EQ(w.check, CheckMode::kFirst);
  EXPECT_TRUE(w.roofline);
}

TEST(WorkloadParse, ShippedConfigsLoadAndValidate) {
  for (const char* name : {"tiny", "quickstart"}) {
    SCOPED_TRACE(name);
    Workload w = load_workload_file(std::string(MOE_SOURCE_DIR) + "/configs/" + name + ".json");
    EXPECT_EQ(w.name, name);
    for (int world : {1, 2, 4}) {
      Workload copy = w;
      resolve_and_validate(copy, world);
    }
  }
  // Every model-shaped workload loads and resolves a mesh at 1 to 8 ranks (EP 8 is the largest
  // mesh the issues ask of them).
  int models = 0;
  for (const char* dir : {"/configs/models", "/configs/bench"})
    for (const auto& entry :
         std::filesystem::directory_iterator(std::string(MOE_SOURCE_DIR) + dir)) {
      SCOPED_TRACE(entry.path().string());
      Workload w = load_workload_file(entry.path().string());
      for (int world : {1, 2, 4, 8}) {
        Workload copy = w;
        resolve_and_validate(copy, world);
        EXPECT_EQ(copy.mesh.ep * copy.mesh.fsdp, world);
      }
      ++models;
    }
  EXPECT_GE(models, 10);
  Workload tiny = load_workload_file(std::string(MOE_SOURCE_DIR) + "/configs/tiny.json");
  EXPECT_EQ(tiny.model.hidden, 64);
  EXPECT_EQ(tiny.tokens_per_rank, 32);
  EXPECT_EQ(tiny.steps, 4);
  EXPECT_EQ(tiny.seed, 1u);
}

TEST(WorkloadParse, MissingRequiredKeysAreNamed) {
  EXPECT_TRUE(ThrowsUserError(
      [] {
        workload_from_json_text(R"({"model": {"hidden": 8, "experts": 4, "topk": 1}})", "m.json");
      },
      {"m.json", "missing required keys", "model.ffn", "tokens_per_rank"}));
  EXPECT_TRUE(
      ThrowsUserError([] { workload_from_json_text(R"({"tokens_per_rank": 4})", "m.json"); },
                      {"model.hidden", "model.ffn", "model.experts", "model.topk"}));
}

TEST(WorkloadParse, UnknownTopLevelKeySuggestsClosest) {
  EXPECT_TRUE(ThrowsUserError([] { workload_from_json_text(with(R"("stpes": 3)"), "x.json"); },
                              {"unknown key 'stpes' in x.json", "did you mean 'steps'?"}));
  EXPECT_TRUE(
      ThrowsUserError([] { workload_from_json_text(with(R"("tokens_per_rnak": 3)"), "x.json"); },
                      {"'tokens_per_rnak'", "did you mean 'tokens_per_rank'?"}));
}

TEST(WorkloadParse, UnknownNestedKeySuggestsFullPath) {
  EXPECT_TRUE(ThrowsUserError(
      [] { workload_from_json_text(with(R"("router": {"scorr": "softmax"})"), "configs/x.json"); },
      {"unknown key 'router.scorr' in configs/x.json; did you mean 'router.score'?"}));
  EXPECT_TRUE(ThrowsUserError([] { workload_from_json_text(with(R"("mesh": {"epp": 2})"), "x"); },
                              {"'mesh.epp'", "did you mean 'mesh.ep'?"}));
}

TEST(WorkloadParse, KeyAtWrongLevelSuggestsItsSection) {
  EXPECT_TRUE(ThrowsUserError([] { workload_from_json_text(with(R"("groups": 2)"), "x"); },
                              {"unknown key 'groups'", "did you mean 'router.groups'?"}));
  // A dotted name is not a path: it would be silently ignored otherwise.
  EXPECT_TRUE(ThrowsUserError([] { workload_from_json_text(with(R"("router.groups": 2)"), "x"); },
                              {"'router.groups'", "must be nested", R"("router": {"groups")"}));
  EXPECT_TRUE(ThrowsUserError([] { workload_from_json_text(with(R"("foo.bar": 2)"), "x"); },
                              {"unknown key 'foo.bar'", "known keys: name, model"}));
}

TEST(WorkloadParse, UnknownKeyWithoutSuggestionListsKnownKeys) {
  EXPECT_TRUE(
      ThrowsUserError([] { workload_from_json_text(with(R"("router": {"temperature": 2})"), "x"); },
                      {"unknown key 'router.temperature'", "known router keys", "aux_coeff"}));
  EXPECT_TRUE(ThrowsUserError([] { workload_from_json_text(with(R"("frobnicate": 1)"), "x"); },
                              {"unknown key 'frobnicate'", "known keys", "tokens_per_rank"}));
}

TEST(WorkloadParse, WrongTypesNameKeyExpectedAndGot) {
  struct Case {
    std::string entry, key, expected, got;
  };
  const std::vector<Case> cases = {
      {R"("steps": "4")", "'steps'", "expected an integer", "\"4\""},
      {R"("warmup": 1.5)", "'warmup'", "expected an integer", "1.5"},
      {R"("router": {"normalize_topk": 1})", "'router.normalize_topk'", "expected true or false",
       "1"},
      {R"("router": {"scaling": "big"})", "'router.scaling'", "expected a number", "\"big\""},
      {R"("name": 5)", "'name'", "expected a string", "5"},
      {R"("router": [1, 2])", "'router'", "expected an object", "[1,2]"},
      {R"("mesh": {"ep": "half"})", "'mesh.ep'", "positive integer or \"auto\"", "\"half\""},
      {R"("mesh": {"fsdp": 0})", "'mesh.fsdp'", "positive integer or \"auto\"", "0"},
      {R"("seed": -1)", "'seed'", "non-negative integer", "-1"},
      {R"("dtype": 16)", "'dtype'", "expected one of \"bf16\", \"fp32\"", "16"},
      {R"("steps": 99999999999999999999)", "'steps'", "expected an integer", "1e+20"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.entry);
    EXPECT_TRUE(ThrowsUserError([&] { workload_from_json_text(with(c.entry), "t.json"); },
                                {c.key, "t.json", c.expected, "got " + c.got}));
  }
  EXPECT_TRUE(ThrowsUserError(
      [] {
        workload_from_json_text(R"({"model": {"hidden": "64", "ffn": 1, "experts": 1,
                                     "topk": 1}, "tokens_per_rank": 1})",
                                "t.json");
      },
      {"'model.hidden'", "expected an integer", "got \"64\""}));
}

TEST(WorkloadParse, BadEnumValuesListChoicesAndSuggest) {
  EXPECT_TRUE(ThrowsUserError(
      [] { workload_from_json_text(with(R"("router": {"score": "softmx"})"), "t"); },
      {"'router.score'", "\"softmax\", \"sigmoid\"", "got \"softmx\"",
       "did you mean \"softmax\"?"}));
  EXPECT_TRUE(ThrowsUserError([] { workload_from_json_text(with(R"("dtype": "fp16")"), "t"); },
                              {"'dtype'", "\"bf16\", \"fp32\"", "got \"fp16\""}));
  EXPECT_TRUE(ThrowsUserError([] { workload_from_json_text(with(R"("check": "always")"), "t"); },
                              {"'check'", "\"first\", \"every\", \"off\""}));
  EXPECT_TRUE(
      ThrowsUserError([] { workload_from_json_text(with(R"("dispatch": "nvshmem")"), "t"); },
                      {"'dispatch'", "\"alltoall\", \"allgather\", \"alltoall_dedup\", \"nvlink\"",
                       "got \"nvshmem\""}));
  EXPECT_EQ(workload_from_json_text(with(R"("dispatch": "allgather")"), "t").dispatch,
            DispatchKind::kAllgather);
  EXPECT_EQ(workload_from_json_text(with(R"("dispatch": "alltoall_dedup")"), "t").dispatch,
            DispatchKind::kAlltoallDedup);
  EXPECT_EQ(workload_from_json_text(with(R"("dispatch": "nvlink")"), "t").dispatch,
            DispatchKind::kNvlink);
}

TEST(WorkloadParse, MalformedJsonReportsLineAndColumn) {
  const std::string text = "{\n  \"steps\": 3,\n  \"warmup\": ,\n}\n";
  EXPECT_TRUE(ThrowsUserError([&] { workload_from_json_text(text, "bad.json"); },
                              {"malformed JSON in bad.json", "line 3, column 13", "syntax error"}));
  // A missing closing brace is reported where the input ends.
  EXPECT_TRUE(ThrowsUserError([] { workload_from_json_text("{\n\"steps\": 3\n", "b.json"); },
                              {"b.json", "line 3"}));
  EXPECT_TRUE(ThrowsUserError([] { workload_from_json_text("", "empty.json"); },
                              {"empty.json", "line 1, column 1"}));
}

TEST(WorkloadParse, TopLevelMustBeAnObject) {
  EXPECT_TRUE(ThrowsUserError([] { workload_from_json_text("[1, 2]", "arr.json"); },
                              {"arr.json", "expected a JSON object", "[1,2]"}));
}

TEST(WorkloadParse, FileNotFoundAndFileErrorsNameThePath) {
  EXPECT_TRUE(ThrowsUserError([] { load_workload_file("configs/no_such_workload.json"); },
                              {"'configs/no_such_workload.json' not found"}));
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("moe_workload_" + std::to_string(getpid()) + ".json"))
                               .string();
  std::ofstream(path) << with(R"("router": {"scorr": "softmax"})");
  EXPECT_TRUE(ThrowsUserError([&] { load_workload_file(path); },
                              {"unknown key 'router.scorr' in " + path}));
  std::filesystem::remove(path);
}

TEST(WorkloadParse, BaseFilesMergeUnderTheirChildren) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("moe_base_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "models");
  std::ofstream(dir / "models" / "m.json")
      << R"({"name": "m", "model": {"hidden": 64, "ffn": 32, "experts": 8, "topk": 2},
             "router": {"score": "softmax", "normalize_topk": true}, "tokens_per_rank": 16})";
  // The child replaces one model key and adds a router key; the rest comes from the base.
  std::ofstream(dir / "child.json") << R"({"base": "models/m.json", "name": "c",
      "model": {"topk": 4}, "router": {"z_coeff": 0.5}})";
  const Workload w = load_workload_file((dir / "child.json").string());
  EXPECT_EQ(w.name, "c");
  EXPECT_EQ(w.model.hidden, 64);
  EXPECT_EQ(w.model.topk, 4);
  EXPECT_TRUE(w.router.normalize_topk);
  EXPECT_DOUBLE_EQ(w.router.z_coeff, 0.5);
  // A base that is not there, one that is no string, and a cycle are refused by name.
  std::ofstream(dir / "missing.json") << R"({"base": "models/nope.json"})";
  EXPECT_TRUE(ThrowsUserError([&] { load_workload_file((dir / "missing.json").string()); },
                              {"\"base\" models/nope.json is no file"}));
  std::ofstream(dir / "number.json") << R"({"base": 3})";
  EXPECT_TRUE(ThrowsUserError([&] { load_workload_file((dir / "number.json").string()); },
                              {"\"base\" names the workload file"}));
  std::ofstream(dir / "a.json") << R"({"base": "b.json"})";
  std::ofstream(dir / "b.json") << R"({"base": "a.json"})";
  EXPECT_TRUE(ThrowsUserError([&] { load_workload_file((dir / "a.json").string()); },
                              {"leads back to a file already being read"}));
  std::filesystem::remove_all(dir);
}

// A bench workload is its model's, named apart and warmed up for warmup_s (the GPU's clocks).
TEST(WorkloadParse, BenchWorkloadsAreTheirModelsShapes) {
  for (const char* m : {"deepseek_v3", "mixtral_8x7b", "qwen3_30b_a3b"}) {
    const std::string root = std::string(MOE_SOURCE_DIR) + "/configs/";
    Workload bench = load_workload_file(root + "bench/" + m + ".json");
    const Workload model = load_workload_file(root + "models/" + m + ".json");
    EXPECT_NE(bench.name, model.name) << m;
    EXPECT_EQ(bench.warmup_s, 5.0) << m;
    bench.name = model.name;
    bench.warmup_s = model.warmup_s;
    EXPECT_EQ(workload_to_json(bench).dump(), workload_to_json(model).dump()) << m;
  }
}

// ---- --set overrides ----

TEST(WorkloadOverride, IntegerKeys) {
  Workload w = minimal();
  apply_override(w, "steps=7");
  apply_override(w, "model.hidden=128");
  apply_override(w, " warmup = 0 ");
  EXPECT_EQ(w.steps, 7);
  EXPECT_EQ(w.model.hidden, 128);
  EXPECT_EQ(w.warmup, 0);
}

TEST(WorkloadOverride, IntegerKeysRejectNonIntegers) {
  for (const char* value : {"1.5", "abc", "", "3x", "[3]"}) {
    SCOPED_TRACE(value);
    Workload w = minimal();
    EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, std::string("model.topk=") + value); },
                                {"'model.topk'", "--set model.topk=", "expected an integer"}));
  }
}

TEST(WorkloadOverride, BoolKeys) {
  Workload w = minimal();
  apply_override(w, "router.normalize_topk=true");
  EXPECT_TRUE(w.router.normalize_topk);
  apply_override(w, "router.normalize_topk=0");
  EXPECT_FALSE(w.router.normalize_topk);
  apply_override(w, "router.expert_bias=1");
  EXPECT_TRUE(w.router.expert_bias);
  apply_override(w, "router.expert_bias=false");
  EXPECT_FALSE(w.router.expert_bias);
  apply_override(w, "roofline=false");
  EXPECT_FALSE(w.roofline);
  apply_override(w, "roofline=1");
  EXPECT_TRUE(w.roofline);
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "roofline=off"); },
                              {"'roofline'", "expected true or false", "\"off\""}));
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "router.expert_bias=yes"); },
                              {"'router.expert_bias'", "expected true or false", "\"yes\""}));
}

TEST(WorkloadOverride, NumberKeys) {
  Workload w = minimal();
  apply_override(w, "router.scaling=2.5");
  EXPECT_DOUBLE_EQ(w.router.scaling, 2.5);
  apply_override(w, "router.aux_coeff=1e-2");
  EXPECT_DOUBLE_EQ(w.router.aux_coeff, 0.01);
  apply_override(w, "router.z_coeff=3");  // an integer is a number too
  EXPECT_DOUBLE_EQ(w.router.z_coeff, 3.0);
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "router.scaling=fast"); },
                              {"'router.scaling'", "expected a number", "\"fast\""}));
}

TEST(WorkloadOverride, StringAndEnumKeys) {
  Workload w = minimal();
  apply_override(w, "name=my run");
  EXPECT_EQ(w.name, "my run");
  apply_override(w, "name=42");  // stays text, not a number
  EXPECT_EQ(w.name, "42");
  apply_override(w, "name=\"quoted\"");
  EXPECT_EQ(w.name, "quoted");
  apply_override(w, "router.score=sigmoid");
  EXPECT_STREQ(name_of(w.router.score), "sigmoid");
  apply_override(w, "dtype=fp32");
  EXPECT_EQ(w.dtype, DType::kFp32);
  apply_override(w, "check=off");
  EXPECT_EQ(w.check, CheckMode::kOff);
  apply_override(w, "dispatch=alltoall");
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "dtype=fp8"); },
                              {"'dtype'", "--set dtype=fp8", "\"bf16\", \"fp32\""}));
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "check=evry"); },
                              {"'check'", "did you mean \"every\"?"}));
}

TEST(WorkloadOverride, MeshSizesAndAuto) {
  Workload w = minimal();
  apply_override(w, "mesh.ep=2");
  apply_override(w, "mesh.fsdp=3");
  EXPECT_EQ(w.mesh.ep, 2);
  EXPECT_EQ(w.mesh.fsdp, 3);
  apply_override(w, "mesh.ep=auto");
  EXPECT_EQ(w.mesh.ep, 0);
  EXPECT_EQ(w.mesh.fsdp, 3);
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "mesh.fsdp=0"); },
                              {"'mesh.fsdp'", "positive integer or \"auto\""}));
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "mesh.ep=-2"); }, {"'mesh.ep'"}));
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "mesh.ep=automatic"); }, {"'mesh.ep'"}));
}

TEST(WorkloadOverride, SeedTakesTheFullUint64Range) {
  Workload w = minimal();
  apply_override(w, "seed=18446744073709551615");
  EXPECT_EQ(w.seed, std::numeric_limits<uint64_t>::max());
  apply_override(w, "seed=0");
  EXPECT_EQ(w.seed, 0u);
  EXPECT_TRUE(
      ThrowsUserError([&] { apply_override(w, "seed=-1"); }, {"'seed'", "non-negative integer"}));
}

TEST(WorkloadOverride, MalformedAndUnknownAssignments) {
  Workload w = minimal();
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "model.topk"); },
                              {"'model.topk'", "has no '='", "key.path=value"}));
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "router.scorr=sigmoid"); },
                              {"unknown key 'router.scorr'", "did you mean 'router.score'?"}));
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "router=sigmoid"); },
                              {"'router'", "is a section", "router.score"}));
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "=3"); }, {"unknown key ''"}));
}

TEST(WorkloadParse, ExpertGradDtype) {
  Workload w = minimal();
  EXPECT_EQ(w.expert_grad_dtype, DType::kFp32);
  EXPECT_EQ(workload_to_json(w).at("expert_grad_dtype"), "fp32");
  apply_override(w, "expert_grad_dtype=bf16");
  EXPECT_EQ(w.expert_grad_dtype, DType::kBf16);
  EXPECT_EQ(workload_to_json(w).at("expert_grad_dtype"), "bf16");
  resolve_and_validate(w, 1);
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "expert_grad_dtype=fp16"); },
                              {"'expert_grad_dtype'", "\"bf16\", \"fp32\""}));
  // Gradients narrower than the weights they train: refused, naming both keys and the fix.
  Workload fp32 = minimal();
  apply_override(fp32, "dtype=fp32");
  apply_override(fp32, "expert_grad_dtype=bf16");
  EXPECT_TRUE(ThrowsUserError([&] { resolve_and_validate(fp32, 1); },
                              {"expert_grad_dtype = \"bf16\"", "dtype = \"fp32\"", "set"}));
}

TEST(WorkloadOverride, DispatchDtypeFp8NeedsTheBlockRecipeAndAlignedRows) {
  Workload w = minimal();
  EXPECT_EQ(w.dispatch_dtype, DispatchDtype::kBf16);
  apply_override(w, "dispatch_dtype=fp8");
  EXPECT_EQ(workload_to_json(w).at("dispatch_dtype"), "fp8");
  // FP8 rows carry 1 x 128 scales: fp8_block only, the refusal naming both keys and the fix.
  for (const char* precision : {"bf16", "fp8_tensor"}) {
    Workload v = w;
    apply_override(v, std::string("precision=") + precision);
    EXPECT_TRUE(ThrowsUserError(
        [&] { resolve_and_validate(v, 1); },
        {"dispatch_dtype = \"fp8\"", std::string("precision = \"") + precision + "\"",
         "set precision to \"fp8_block\""}));
  }
  apply_override(w, "precision=fp8_block");
  apply_override(w, "model.hidden=72");
  EXPECT_TRUE(ThrowsUserError([&] { resolve_and_validate(w, 1); },
                              {"model.hidden = 72", "multiple of 16"}));
  apply_override(w, "model.hidden=80");
  resolve_and_validate(w, 1);
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "dispatch_dtype=fp16"); },
                              {"'dispatch_dtype'", "\"bf16\", \"fp8\""}));
}

// fp8_weights cached: only FP8 quantizes weights, and the first step, which quantizes them, must
// be a warm-up step; each refusal names the keys and the fix.
TEST(WorkloadValidate, Fp8WeightsCachedNeedsFp8AndAWarmup) {
  Workload w = minimal();
  apply_override(w, "fp8_weights=cached");
  EXPECT_EQ(workload_to_json(w).at("fp8_weights"), "cached");
  EXPECT_TRUE(ThrowsUserError([&] { resolve_and_validate(w, 1); },
                              {"fp8_weights = \"cached\"", "precision = \"bf16\"",
                               "set precision to \"fp8_tensor\" or \"fp8_block\""}));
  apply_override(w, "precision=fp8_tensor");
  apply_override(w, "warmup=0");
  EXPECT_TRUE(ThrowsUserError([&] { resolve_and_validate(w, 1); },
                              {"fp8_weights = \"cached\"", "warmup = 0", "set warmup to 1"}));
  apply_override(w, "warmup=1");
  resolve_and_validate(w, 1);
  EXPECT_NE(describe_how_keys(w).find("fp8_weights=cached"), std::string::npos);
  EXPECT_EQ(describe_how_keys(minimal()).find("fp8_weights"), std::string::npos);
  EXPECT_TRUE(ThrowsUserError([&] { apply_override(w, "fp8_weights=always"); },
                              {"'fp8_weights'", "\"per_step\", \"cached\""}));
}

TEST(WorkloadOverride, FailedOverrideLeavesWorkloadUnchanged) {
  Workload w = minimal();
  apply_override(w, "steps=9");
  EXPECT_THROW(apply_override(w, "steps=abc"), UserError);
  EXPECT_EQ(w.steps, 9);
  EXPECT_EQ(workload_to_json(w), workload_to_json([] {
              Workload m = minimal();
              apply_override(m, "steps=9");
              return m;
            }()));
}

// ---- Mesh resolution ----

TEST(WorkloadMesh, BothAutoPicksWidestEpThatDividesExperts) {
  struct Case {
    int world;
    int64_t experts, ep, fsdp;
  };
  const std::vector<Case> cases = {{1, 8, 1, 1},  {2, 8, 2, 1},    {4, 8, 4, 1}, {8, 8, 8, 1},
                                   {16, 8, 8, 2}, {6, 8, 2, 3},    {3, 8, 1, 3}, {12, 6, 6, 2},
                                   {4, 6, 2, 2},  {64, 128, 64, 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE("world " + std::to_string(c.world) + " experts " + std::to_string(c.experts));
    Workload w = minimal();
    w.model.experts = c.experts;
    w.model.topk = 1;
    resolve_and_validate(w, c.world);
    EXPECT_EQ(w.mesh.ep, c.ep);
    EXPECT_EQ(w.mesh.fsdp, c.fsdp);
  }
}

TEST(WorkloadMesh, OneAutoIsTheWorldOverTheOther) {
  Workload w = minimal();
  w.mesh.ep = 2;
  resolve_and_validate(w, 8);
  EXPECT_EQ(w.mesh.fsdp, 4);
  Workload v = minimal();
  v.mesh.fsdp = 2;
  resolve_and_validate(v, 8);
  EXPECT_EQ(v.mesh.ep, 4);
  Workload both = minimal();
  both.mesh.ep = 4;
  both.mesh.fsdp = 2;
  resolve_and_validate(both, 8);
  resolve_and_validate(both, 8);  // already resolved: idempotent
  EXPECT_EQ(both.mesh.ep, 4);
  EXPECT_EQ(both.mesh.fsdp, 2);
}

TEST(WorkloadMesh, Errors) {
  EXPECT_TRUE(
      ThrowsUserError([] { validate_with({"mesh.ep=3"}, 6); },
                      {"model.experts = 8", "mesh.ep = 3", "valid mesh.ep values", "1, 2"}));
  EXPECT_TRUE(ThrowsUserError([] { validate_with({"mesh.ep=4"}, 6); },
                              {"mesh.ep = 4", "world size 6", "mpirun -np"}));
  EXPECT_TRUE(ThrowsUserError([] { validate_with({"mesh.fsdp=4"}, 6); },
                              {"mesh.fsdp = 4", "world size 6", "1, 2, 3, 6"}));
  EXPECT_TRUE(ThrowsUserError([] { validate_with({"mesh.fsdp=2"}, 6); },
                              {"mesh.ep = 3", "derived", "model.experts = 8"}));
  EXPECT_TRUE(ThrowsUserError(
      [] {
        validate_with({"mesh.ep=2", "mesh.fsdp=2"}, 8);
      },
      {"mesh.ep (2) x mesh.fsdp (2) = 4", "world size is 8", "mpirun -np"}));
  EXPECT_TRUE(ThrowsUserError(
      [] {
        Workload w = minimal();
        w.mesh.ep = -1;
        resolve_and_validate(w, 1);
      },
      {"mesh.ep = -1"}));
}

// ---- Validation ----

TEST(WorkloadValidate, SizesMustBePositive) {
  for (std::string key :
       {"model.hidden", "model.ffn", "model.experts", "model.topk", "tokens_per_rank"}) {
    SCOPED_TRACE(key);
    EXPECT_TRUE(ThrowsUserError([&] { validate_with({key + "=0"}); },
                                {key + " = 0", "positive", "--set " + key}));
    EXPECT_TRUE(ThrowsUserError([&] { validate_with({key + "=-3"}); }, {key + " = -3"}));
  }
  EXPECT_TRUE(
      ThrowsUserError([] { validate_with({"steps=0"}); }, {"steps = 0", "between 1 and 10000000"}));
  EXPECT_TRUE(ThrowsUserError([] { validate_with({"warmup=-1"}); },
                              {"warmup = -1", "between 0 and 10000000"}));
  validate_with({"warmup=0", "steps=1"});
  // tokens_per_rank left out of a struct built in code reads as "not given".
  Workload w = minimal();
  w.tokens_per_rank = 0;
  EXPECT_TRUE(ThrowsUserError([&] { resolve_and_validate(w, 1); }, {"tokens_per_rank = 0"}));
}

TEST(WorkloadValidate, TopkAtMostExperts) {
  EXPECT_TRUE(ThrowsUserError([] { validate_with({"model.topk=9"}); },
                              {"model.topk = 9", "model.experts = 8", "model.topk <= 8"}));
  validate_with({"model.topk=8"});
}

TEST(WorkloadValidate, RouterGroups) {
  EXPECT_TRUE(ThrowsUserError([] { validate_with({"router.groups=0"}); }, {"router.groups = 0"}));
  EXPECT_TRUE(ThrowsUserError([] { validate_with({"router.groups=3"}); },
                              {"router.groups = 3", "model.experts = 8", "1, 2, 4, 8"}));
  EXPECT_TRUE(ThrowsUserError(
      [] {
        validate_with({"router.groups=4", "router.group_topk=0"});
      },
      {"router.group_topk = 0", "router.groups = 4"}));
  EXPECT_TRUE(ThrowsUserError(
      [] {
        validate_with({"router.groups=4", "router.group_topk=5"});
      },
      {"router.group_topk = 5"}));
  EXPECT_TRUE(ThrowsUserError([] { validate_with({"router.group_topk=2"}); },
                              {"router.group_topk = 2", "router.groups = 1"}));
  EXPECT_TRUE(ThrowsUserError(
      [] {
        validate_with({"model.topk=3", "router.groups=4", "router.group_topk=2"});
      },
      {"model.topk = 3", "router.group_topk = 2"}));
  // 4 groups of 2 experts, 1 kept: only 2 experts selectable for topk 4.
  EXPECT_TRUE(ThrowsUserError(
      [] {
        validate_with({"model.topk=4", "router.groups=4", "router.group_topk=1"});
      },
      {"model.topk = 4", "router.group_topk = 1", "2 experts"}));
  validate_with({"model.topk=4", "router.groups=4", "router.group_topk=2"});
}

TEST(WorkloadValidate, RouterScoreAndCoefficients) {
  EXPECT_TRUE(ThrowsUserError(
      [] {
        validate_with({"router.score=sigmoid", "router.softmax_after_topk=true"});
      },
      {"router.softmax_after_topk", "router.score", "sigmoid"}));
  validate_with({"router.score=sigmoid", "router.normalize_topk=true"});
  for (const char* bad : {"0", "-1"}) {
    SCOPED_TRACE(bad);
    EXPECT_TRUE(ThrowsUserError([&] { validate_with({std::string("router.scaling=") + bad}); },
                                {"router.scaling", "finite number > 0"}));
  }
  EXPECT_TRUE(ThrowsUserError([] { validate_with({"router.aux_coeff=-0.1"}); },
                              {"router.aux_coeff = -0.1", ">= 0"}));
  EXPECT_TRUE(ThrowsUserError([] { validate_with({"router.z_coeff=-1"}); },
                              {"router.z_coeff = -1", ">= 0"}));
  // JSON has no infinity or NaN: out-of-range text is not a number at all.
  EXPECT_TRUE(ThrowsUserError([] { validate_with({"router.scaling=1e999"}); },
                              {"'router.scaling'", "expected a number"}));
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
    Workload w = minimal();
    w.router.scaling = bad;
    EXPECT_TRUE(ThrowsUserError([&] { resolve_and_validate(w, 1); },
                                {"router.scaling", "finite number > 0"}));
  }
}

TEST(WorkloadValidate, FieldsSetInCodeAreCheckedToo) {
  for (int64_t streams : {0, 33}) {
    Workload w = minimal();
    w.gemm.streams = streams;
    EXPECT_TRUE(ThrowsUserError([&] { resolve_and_validate(w, 1); },
                                {"gemm.streams = " + std::to_string(streams), "1 and 32"}));
  }
  for (int64_t cluster : {0, 3}) {
    Workload w = minimal();
    w.gemm.sm90_cluster = cluster;
    EXPECT_TRUE(ThrowsUserError([&] { resolve_and_validate(w, 1); },
                                {"gemm.sm90_cluster = " + std::to_string(cluster), "1 or 2"}));
  }
  for (int64_t ctas : {-1, 1025}) {
    Workload w = minimal();
    w.gemm.sm90_ctas = ctas;
    EXPECT_TRUE(ThrowsUserError([&] { resolve_and_validate(w, 1); },
                                {"gemm.sm90_ctas = " + std::to_string(ctas), "0 and 1024"}));
  }
  Workload w = minimal();
  w.gemm.sm90_cluster = 2;
  w.gemm.sm90_schedule = Sm90Schedule::kPingpong;
  EXPECT_TRUE(ThrowsUserError([&] { resolve_and_validate(w, 1); },
                              {"gemm.sm90_schedule = pingpong", "gemm.sm90_cluster = 1"}));
}

// gemm.method_<gemm> sets one expert GEMM's method over a fixed gemm.method, as a rerun of an
// auto run's per_gemm choice does; over auto it is refused, naming the key and both ways out.
TEST(WorkloadValidate, PerGemmMethodsNeedAFixedGemmMethod) {
  EXPECT_TRUE(ThrowsUserError([] { validate_with({"gemm.method_wgrad_in=grouped_batched"}); },
                              {"gemm.method_wgrad_in = grouped_batched", "gemm.method",
                               "warmup_per_gemm.against", "gemm.method_wgrad_in to auto"}));
  Workload w = minimal();
  for (const char* s : {"gemm.method=grouped_sm90", "gemm.method_wgrad_in=grouped_batched",
                        "gemm.method_up=lt_multistream"})
    apply_override(w, s);
  resolve_and_validate(w, 1);
  EXPECT_EQ(w.gemm.methods[size_t(ExpertGemm::kWgradIn)], GemmMethod::kGroupedBatched);
  EXPECT_EQ(w.gemm.methods[size_t(ExpertGemm::kUp)], GemmMethod::kLtMultistream);
  EXPECT_EQ(w.gemm.methods[size_t(ExpertGemm::kDown)], GemmMethod::kAuto);
}

TEST(WorkloadValidate, RowCountMustFitInt32) {
  // 2^20 tokens x 8 experts per token x ep 256 = 2^31 rows.
  Workload w = minimal();
  w.model.experts = 256;
  w.model.topk = 8;
  w.tokens_per_rank = int64_t(1) << 20;
  EXPECT_TRUE(ThrowsUserError([&] { resolve_and_validate(w, 256); },
                              {"tokens_per_rank", "mesh.ep (256)", "int32"}));
  EXPECT_EQ(w.mesh.ep, 0);  // a failed validation leaves the mesh unresolved
  Workload fits = w;
  resolve_and_validate(fits, 128);  // half the rows fit
  EXPECT_EQ(fits.mesh.ep, 128);
  Workload wide = minimal();  // 2^25 tokens x hidden 64 = 2^31 elements
  wide.tokens_per_rank = int64_t(1) << 25;
  EXPECT_TRUE(ThrowsUserError([&] { resolve_and_validate(wide, 1); },
                              {"tokens_per_rank", "model.hidden (64)", "MPI"}));
  Workload huge = minimal();
  huge.tokens_per_rank = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_TRUE(ThrowsUserError([&] { resolve_and_validate(huge, 1); }, {"tokens_per_rank"}));
}

// ---- JSON form and names ----

TEST(WorkloadJson, RoundTripsEveryKey) {
  Workload w = minimal();
  for (const char* s : {"name=rt", "router.score=sigmoid", "router.scaling=0.5", "router.groups=2",
                        "router.expert_bias=true", "mesh.fsdp=2", "dtype=fp32", "seed=99",
                        "check=every", "roofline=false"})
    apply_override(w, s);
  const nlohmann::json j = workload_to_json(w);
  EXPECT_EQ(j["mesh"]["ep"], "auto");
  EXPECT_EQ(j["mesh"]["fsdp"], 2);
  EXPECT_EQ(j["dtype"], "fp32");
  EXPECT_EQ(j["check"], "every");
  EXPECT_EQ(j["roofline"], false);
  Workload back = workload_from_json_text(j.dump(), "dump");
  EXPECT_EQ(workload_to_json(back), j);
  resolve_and_validate(w, 8);
  EXPECT_EQ(workload_to_json(w)["mesh"]["ep"], 4);
}

TEST(WorkloadJson, EnumNames) {
  EXPECT_STREQ(dtype_name(DType::kBf16), "bf16");
  EXPECT_STREQ(dtype_name(DType::kFp32), "fp32");
  EXPECT_STREQ(name_of(CheckMode::kOff), "off");
  EXPECT_STREQ(name_of(CheckMode::kFirst), "first");
  EXPECT_STREQ(name_of(CheckMode::kEvery), "every");
  EXPECT_STREQ(name_of(Overlap::kDispatchBwd), "dispatch_bwd");
  EXPECT_STREQ(name_of(GemmMethod::kGroupedBatched), "grouped_batched");
  EXPECT_STREQ(name_of(GemmAlgo::kBucket), "bucket");
}

// ---- Memory estimate ----

TEST(WorkloadEstimate, ReferenceMatchesItsFormulaOnASmallCase) {
  // One rank (ep 1, fsdp 1), the CPU backend's floats. The step's own buffers are checked against
  // what MoeLayer really allocates in test_buffer_plan.cpp.
  Workload w = workload_from_json_text(R"({"model": {"hidden": 4, "ffn": 2, "experts": 2,
      "topk": 1}, "tokens_per_rank": 3, "check": "off"})",
                                       "t");
  const int64_t H = 4, F = 2, E = 2, K = 1, T = 3;
  const int64_t step = estimate_rank_bytes(w, 1);
  w.check = CheckMode::kFirst;
  const int64_t reference = E * 3 * H * F * 8 + 2 * T * H * 8 + T * K * 16 + T * E * 8 +
                            // one expert's gradients at a time, float and float64
                            2 * T * H * 8 + 3 * H * F * 12 + H * E * 8 +
                            // the results' host copies: one expert's grads, tokens, gate,
                            // routing
                            3 * H * F * 4 + 4 * T * H * 4 + 2 * H * E * 4 + T * K * 9;
  EXPECT_EQ(estimate_rank_bytes(w, 1), step + reference);
}

TEST(WorkloadEstimate, GrowsWithTokensShrinksWithEp) {
  Workload w = minimal();
  w.check = CheckMode::kOff;
  const int64_t base = estimate_rank_bytes(w, 8);  // auto: ep 8
  Workload more = w;
  more.tokens_per_rank *= 4;
  EXPECT_GT(estimate_rank_bytes(more, 8), base);
  int64_t previous = std::numeric_limits<int64_t>::max();
  for (int64_t ep : {1, 2, 4, 8}) {
    Workload e = w;
    e.mesh.ep = ep;
    e.mesh.fsdp = 8 / ep;
    const int64_t bytes = estimate_rank_bytes(e, 8);
    EXPECT_LT(bytes, previous) << "ep " << ep;
    previous = bytes;
  }
}

TEST(WorkloadEstimate, ReferenceAndStorageSize) {
  Workload w = minimal();
  w.check = CheckMode::kOff;
  Workload checked = minimal();
  checked.check = CheckMode::kFirst;
  const int64_t off = estimate_rank_bytes(w, 4);
  const int64_t on = estimate_rank_bytes(checked, 4);
  // The reference holds at least all experts' weights and the world's x and dout in float64.
  EXPECT_GE(on - off, 8 * 3 * 64 * 32 * 8 + 2 * 4 * 16 * 64 * 8);
  EXPECT_LT(estimate_rank_bytes(w, 4, 2, 4), estimate_rank_bytes(w, 4, 4, 4));
  EXPECT_EQ(estimate_rank_bytes(w, 4), estimate_rank_bytes(w, 4, 4, 4));
  // bf16 expert gradients (2 bytes each where the backend keeps bf16): 2 bytes less per gathered
  // gradient element (fsdp 1: the gradients are not sharded).
  resolve_and_validate(w, 4);  // ep 4, fsdp 1: 2 local experts
  const int64_t P = 2 * 3 * 64 * 32;
  EXPECT_EQ(estimate_rank_bytes(w, 4, 2, 4) - estimate_rank_bytes(w, 4, 2, 2), 2 * P);
  // An unresolved mesh is resolved (and so checked) on a copy.
  checked.mesh.ep = 3;
  EXPECT_TRUE(ThrowsUserError([&] { estimate_rank_bytes(checked, 6); }, {"mesh.ep = 3"}));
}

}  // namespace
}  // namespace moe
