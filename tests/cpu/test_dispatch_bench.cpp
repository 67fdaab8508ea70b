// `moebench dispatch`'s measurement in a 1-rank world on the CPU backend (the 2-rank figures and
// their agreement with the step: tests/mpi/dispatch_bench.sh), and the equal-split all-to-all's
// size for given bytes.
#include <gtest/gtest.h>
#include <mpi.h>

#include "app/dispatch_bench.h"
#include "comm/mpi_comm.h"
#include "core/error.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/cpu_ops.h"
#include "tests/common/small_workload.h"

namespace moe {
namespace {

TEST(DispatchBench, EqualSplitRowsCarryTheBytesToTheOtherRanks) {
  // 3 other ranks, rows of 1 KiB: 3 MiB to others is 1024 rows to each.
  EXPECT_EQ(equal_split_rows_per_peer(3.0 * 1048576, 4, 1024), 1024);
  EXPECT_EQ(equal_split_rows_per_peer(1024 * 1.4, 2, 1024), 1);  // rounded to the nearest
  EXPECT_EQ(equal_split_rows_per_peer(1024 * 1.6, 2, 1024), 2);
  EXPECT_EQ(equal_split_rows_per_peer(10, 8, 4096), 1);  // at least one row
  EXPECT_THROW(equal_split_rows_per_peer(4096, 1, 4096), Error);
}

TEST(DispatchBench, EveryDispatcherAtEpOneTimesItsPartsAndSendsNothing) {
  const Mesh mesh = make_mesh(1, 0, 1, 1, 8);
  CpuDevice device(DType::kBf16);
  CpuOps ops(device);
  MpiComm comm(MPI_COMM_WORLD, mesh);
  for (const std::string& name : dispatcher_names()) {
    const Workload w = test::small_workload({"dispatch=" + name}, 7);
    const DispatchBenchResult r =
        bench_dispatcher(w, mesh, device, ops, comm, MPI_COMM_WORLD, 1, 3, 60.0);
    EXPECT_EQ(r.dispatcher, name);
    EXPECT_EQ(r.tokens, 16);
    EXPECT_GT(r.layout_ms, 0.0) << name;
    EXPECT_EQ(r.rows_per_token, 0.0) << name << ": rows to other ranks at ep 1";
    for (const DispatchBenchDirection& o : r.dirs) {
      EXPECT_GT(o.ms, 0.0) << name;
      EXPECT_EQ(o.bytes_to_others, 0.0) << name;
      EXPECT_EQ(o.busbw_gbps, 0.0) << name;
      EXPECT_EQ(o.alltoall_ms, 0.0) << name << ": an all-to-all at ep 1";
    }
  }
}

// Balanced routing of 320 tokens x 2 over 8 experts: 80 rows each, one 128-row tile each.
TEST(DispatchBench, GroupedTileRowsOfTheRouting) {
  const Mesh mesh = make_mesh(1, 0, 1, 1, 8);
  CpuDevice device(DType::kBf16);
  CpuOps ops(device);
  MpiComm comm(MPI_COMM_WORLD, mesh);
  const Workload w = test::small_workload(
      {"tokens_per_rank=320", "routing.mode=balanced", "dispatch=alltoall"}, 7);
  const DispatchBenchResult r =
      bench_dispatcher(w, mesh, device, ops, comm, MPI_COMM_WORLD, 0, 1, 60.0);
  EXPECT_DOUBLE_EQ(r.tile_rows_over_rows, 128.0 / 80.0);
  // A capacity's drops are not in the counts: no figure.
  const Workload capped = test::small_workload(
      {"tokens_per_rank=320", "routing.mode=balanced", "capacity_factor=1.0"}, 7);
  EXPECT_EQ(bench_dispatcher(capped, mesh, device, ops, comm, MPI_COMM_WORLD, 0, 1, 60.0)
                .tile_rows_over_rows,
            0.0);
}

}  // namespace
}  // namespace moe
