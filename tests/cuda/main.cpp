// gtest main for the GPU suite: MPI initialised (1-rank world) for code that needs it. Without a
// usable GPU every test is skipped with the reason (see gpu_available in cuda_test_util.h).
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  MPI_Finalize();
  return rc;
}
