// gtest main for the GPU suite (MPI set-up in tests/common/gtest_mpi_main.h). Without a usable GPU
// every test is skipped with the reason (see gpu_available in cuda_test_util.h).
#include "../common/gtest_mpi_main.h"

int main(int argc, char** argv) { return moe::test::run_all_tests_with_mpi(argc, argv); }
