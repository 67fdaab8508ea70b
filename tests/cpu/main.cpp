// gtest main for the CPU unit tests (see tests/common/gtest_mpi_main.h for the MPI set-up).
#include "../common/gtest_mpi_main.h"

int main(int argc, char** argv) { return moe::test::run_all_tests_with_mpi(argc, argv); }
