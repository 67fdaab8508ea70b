// The committed workloads: `moebench list`'s table and --config NAME (a path that exists wins;
// unique names and tails resolve; ambiguous and unknown ones are refused naming the candidates).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "app/catalog.h"
#include "core/error.h"
#include "tests/common/user_error.h"

namespace moe {
namespace {
namespace fs = std::filesystem;

using test::user_error_of;

const std::string kConfigs = std::string(MOE_SOURCE_DIR) + "/configs";

TEST(Catalog, ListsTheCommittedWorkloadsWithTheirShapes) {
  const std::string table = committed_workloads_table(kConfigs);
  // configs/bench/deepseek_v3.json: H 7168, F 2048, E 256, K 8, 4096 tokens per rank.
  bool found = false;
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("bench/deepseek_v3 ", 0) != 0) continue;
    found = true;
    std::istringstream cells(line.substr(18));
    long long h = 0, f = 0, e = 0, k = 0, t = 0;
    cells >> h >> f >> e >> k >> t;
    EXPECT_EQ(h, 7168);
    EXPECT_EQ(f, 2048);
    EXPECT_EQ(e, 256);
    EXPECT_EQ(k, 8);
    EXPECT_EQ(t, 4096);
  }
  EXPECT_TRUE(found) << table;
  EXPECT_NE(table.find("\ntiny "), std::string::npos) << table;
  EXPECT_EQ(table.find("does not load"), std::string::npos) << table;
}

// Names are resolved where no path of the same spelling exists (a path that exists wins, and the
// test may run from the source tree): in a fresh temporary directory.
struct InTempDir {
  fs::path before = fs::current_path();
  fs::path dir = fs::temp_directory_path() / ("moe_catalog_" + std::to_string(::getpid()));
  InTempDir() {
    fs::create_directories(dir);
    fs::current_path(dir);
  }
  ~InTempDir() {
    fs::current_path(before);
    fs::remove_all(dir);
  }
};

TEST(Catalog, ResolvesCommittedNames) {
  const InTempDir away;
  EXPECT_EQ(resolve_config("bench/deepseek_v3", kConfigs), kConfigs + "/bench/deepseek_v3.json");
  EXPECT_EQ(resolve_config("configs/bench/deepseek_v3.json", kConfigs),
            kConfigs + "/bench/deepseek_v3.json");
  EXPECT_EQ(resolve_config("tiny", kConfigs), kConfigs + "/tiny.json");
  // A unique tail: only configs/models/ has Mixtral-8x22B.
  EXPECT_EQ(resolve_config("mixtral_8x22b", kConfigs), kConfigs + "/models/mixtral_8x22b.json");
}

TEST(Catalog, RefusesAmbiguousAndUnknownNames) {
  const std::string two = user_error_of([] { resolve_config("deepseek_v3", kConfigs); });
  EXPECT_NE(two.find("--config deepseek_v3"), std::string::npos) << two;
  EXPECT_NE(two.find("bench/deepseek_v3, models/deepseek_v3"), std::string::npos) << two;
  const std::string none = user_error_of([] { resolve_config("deepseek_v4", kConfigs); });
  EXPECT_NE(none.find("no committed workload of that name"), std::string::npos) << none;
  EXPECT_NE(none.find("bench/qwen3_30b_a3b"), std::string::npos) << none;
  EXPECT_NE(none.find("moebench list"), std::string::npos) << none;
  // A name is matched whole, never as part of one.
  EXPECT_NE(user_error_of([] { resolve_config("seek_v3", kConfigs); }), "(no UserError)");
  const std::string missing = user_error_of([] { resolve_config("tiny", "/no/such/dir"); });
  EXPECT_NE(missing.find("no committed workloads under /no/such/dir"), std::string::npos)
      << missing;
}

TEST(Catalog, AnExistingPathWins) {
  // A file named like a committed workload, in the current directory, is the one loaded.
  const fs::path dir = fs::temp_directory_path() / ("moe_catalog_" + std::to_string(getpid()));
  fs::create_directories(dir / "configs");
  const fs::path here = fs::current_path();
  fs::current_path(dir);
  std::ofstream("tiny") << "{}";
  EXPECT_EQ(resolve_config("tiny", kConfigs), "tiny");
  std::ofstream("configs/own.json") << "{}";
  EXPECT_EQ(resolve_config("configs/own.json", kConfigs), "configs/own.json");
  fs::current_path(here);
  // Names are found in whatever tree is given: a name under two folders is ambiguous there too.
  fs::create_directories(dir / "tree" / "a");
  fs::create_directories(dir / "tree" / "b");
  std::ofstream(dir / "tree" / "a" / "w.json") << "{}";
  std::ofstream(dir / "tree" / "b" / "w.json") << "{}";
  std::ofstream(dir / "tree" / "b" / "notes.txt") << "";
  const std::string tree = (dir / "tree").string();
  EXPECT_NE(user_error_of([&] { resolve_config("w", tree); }).find("a/w, b/w"), std::string::npos);
  EXPECT_EQ(resolve_config("b/w", tree), tree + "/b/w.json");
  EXPECT_EQ(committed_workloads(tree).size(), 2u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace moe
