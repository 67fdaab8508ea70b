// gtest main with MPI initialised as a singleton (a 1-rank world) for code that uses collectives.
//
// ctest runs every test case as its own process, several at once. Each singleton MPI_Init creates
// Open MPI's session directory under /tmp and removes it at MPI_Finalize, so two cases starting and
// ending together race on the same path ("mkdir ... File exists", then MPI_Init aborts). Each
// process therefore gets a private session-directory root, removed after MPI_Finalize.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace moe::test {

inline int run_all_tests_with_mpi(int argc, char** argv) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/moe_test_mpi.XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  if (dir) setenv("OMPI_MCA_orte_tmpdir_base", dir, 1);
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  MPI_Finalize();
  if (dir) {
    std::error_code ec;  // best effort: a leftover empty directory in /tmp is harmless
    std::filesystem::remove_all(dir, ec);
  }
  return rc;
}

}  // namespace moe::test
