// The command line's suggestions for a mistyped subcommand, the launcher's rank read before MPI
// starts, and the finite range check of number options.
#include <gtest/gtest.h>

#include <cstdlib>

#include "app/cli.h"

namespace moe {
namespace {

const std::vector<std::string> kSubcommands = {"run", "compare", "keys"};

TEST(Cli, SuggestsTheNearestSubcommandForATypo) {
  EXPECT_EQ(closest_name("runn", kSubcommands), "run");
  EXPECT_EQ(closest_name("rnu", kSubcommands), "run");  // a swap of neighbours is one slip
  EXPECT_EQ(closest_name("comapre", kSubcommands), "compare");
  EXPECT_EQ(closest_name("compre", kSubcommands), "compare");
  EXPECT_EQ(closest_name("key", kSubcommands), "keys");
  EXPECT_EQ(closest_name("Run", kSubcommands), "run");
}

TEST(Cli, SuggestsNothingForAFarWord) {
  EXPECT_EQ(closest_name("xyz", kSubcommands), "");
  EXPECT_EQ(closest_name("benchmark", kSubcommands), "");
  EXPECT_EQ(closest_name("", kSubcommands), "");
}

TEST(Cli, NamesAnUnknownSubcommandOnly) {
  const char* typo[] = {"moebench", "runn", "--config", "x.json"};
  EXPECT_EQ(unknown_subcommand_message(4, typo, kSubcommands),
            "unknown subcommand 'runn'; did you mean 'run'?");
  const char* far[] = {"moebench", "frobnicate"};
  EXPECT_EQ(unknown_subcommand_message(2, far, kSubcommands),
            "unknown subcommand 'frobnicate'; the subcommands are run, compare, keys "
            "(moebench --help)");
  const char* good[] = {"moebench", "run", "--config", "runn"};  // a value after the subcommand
  EXPECT_EQ(unknown_subcommand_message(4, good, kSubcommands), "");
  const char* flags[] = {"moebench", "--version"};
  EXPECT_EQ(unknown_subcommand_message(2, flags, kSubcommands), "");
}

TEST(Cli, ReadsTheLauncherRankFromTheEnvironment) {
  const char* saved = std::getenv("OMPI_COMM_WORLD_RANK");
  const std::string keep = saved ? saved : "";
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  EXPECT_EQ(launcher_rank(), 3);
  if (saved)
    setenv("OMPI_COMM_WORLD_RANK", keep.c_str(), 1);
  else
    unsetenv("OMPI_COMM_WORLD_RANK");
}

TEST(Cli, FiniteRangeRefusesNanInfinityAndWhatLiesOutside) {
  const CLI::Validator v = finite_range(0.001, 100.0);
  for (std::string ok : {"0.001", "5", "1e2", "0.5"}) EXPECT_EQ(v(ok), "") << ok;
  for (std::string bad : {"nan", "NaN", "inf", "-inf", "0", "100.5", "1e999", "abc", "5x", ""})
    EXPECT_NE(v(bad), "") << bad;  // CLI::Range passed "nan": a --timeout-s that never fires
}

}  // namespace
}  // namespace moe
