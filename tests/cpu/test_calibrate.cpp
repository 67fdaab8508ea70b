// The roofline calibration on the CPU backend in a 1-rank world: the GEMM timing, the rate it
// gives, the all-to-all marked not applicable at ep 1, and that its buffers leave no trace in the
// step's memory high-water mark.
#include <gtest/gtest.h>
#include <mpi.h>

#include "app/calibrate.h"
#include "comm/mpi_comm.h"
#include "core/mesh.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/cpu_ops.h"

namespace moe {
namespace {

TEST(Calibrate, CpuDenseGemmTimeIsPositiveAndUsesNoBackendMemory) {
  CpuDevice device(DType::kBf16);
  CpuOps ops(device);
  const double ms = ops.time_dense_gemm_ms(96, 80, 64, 3);
  EXPECT_GT(ms, 0.0);
  // A 96x80x64 GEMM is well under a second anywhere.
  EXPECT_LT(ms, 1000.0);
  EXPECT_EQ(device.memory_high_water(), 0);
}

TEST(Calibrate, CpuMemoryCopyTimeIsPositiveAndUsesNoBackendMemory) {
  CpuDevice device(DType::kBf16);
  const double ms = device.time_memory_copy_ms(int64_t(8) << 20, 3);
  EXPECT_GT(ms, 0.0);
  // 16 MiB moved: a host that takes a second runs under 20 MB/s.
  EXPECT_LT(ms, 1000.0);
  EXPECT_EQ(device.memory_high_water(), 0);
}

TEST(Calibrate, ResetHighWaterForgetsReleasedBuffers) {
  CpuDevice device(DType::kFp32);
  void* kept = device.alloc(1000);
  void* gone = device.alloc(5000);
  device.release(gone);
  EXPECT_EQ(device.memory_high_water(), 6000);
  device.reset_memory_high_water();
  EXPECT_EQ(device.memory_high_water(), 1000);
  device.release(kept);
}

TEST(Calibrate, SizesDependOnTheBackend) {
  const CalibrationSizes cpu = calibration_sizes("cpu"), cuda = calibration_sizes("cuda");
  EXPECT_EQ(cpu.gemm_m, 512);
  EXPECT_EQ(cuda.gemm_m, 8192);
  EXPECT_GT(cuda.a2a_bytes_per_rank, cpu.a2a_bytes_per_rank);
  for (const CalibrationSizes& s : {cpu, cuda}) {
    EXPECT_GT(s.gemm_iters, 0);
    EXPECT_GT(s.a2a_iters, 0);
    EXPECT_GE(s.a2a_warmup, 0);
    EXPECT_GT(s.mem_copy_bytes, 0);
    EXPECT_GT(s.mem_copy_iters, 0);
  }
}

TEST(Calibrate, OneRankWorldMeasuresTheGemmAndMarksNoAllToAll) {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  ASSERT_EQ(world, 1) << "the unit tests run as a world of one rank";
  const Mesh mesh = make_mesh(1, 0, 1, 1, 8);
  CpuDevice device(DType::kBf16);
  CpuOps ops(device);
  MpiComm comm(MPI_COMM_WORLD, mesh);
  const Calibration c =
      calibrate(device, ops, comm, DType::kBf16, Precision::kBf16, MPI_COMM_WORLD);
  EXPECT_TRUE(c.done);
  EXPECT_GT(c.gemm_tflops, 0.0);
  EXPECT_LT(c.gemm_tflops, 100.0) << "no CPU core runs a 512^3 GEMM at 100 TFLOP/s";
  EXPECT_EQ(c.gemm_m, 512);
  EXPECT_EQ(c.dtype, "bf16");
  EXPECT_EQ(c.ep, 1);
  EXPECT_FALSE(c.has_a2a());
  EXPECT_EQ(c.a2a_algbw_gbps, 0.0);
  EXPECT_EQ(c.a2a_busbw_gbps, 0.0);
  EXPECT_EQ(c.a2a_bytes_per_rank, 0);
  EXPECT_GT(c.seconds, 0.0);
  EXPECT_GT(c.mem_gbps, 0.0);
  EXPECT_EQ(c.mem_copy_bytes, calibration_sizes("cpu").mem_copy_bytes);
  EXPECT_NE(describe(c).find("memory "), std::string::npos) << describe(c);
  EXPECT_NE(describe(c).find("all-to-all not applicable (ep 1)"), std::string::npos) << describe(c);
  EXPECT_NE(describe(c).find("512x512x512 bf16"), std::string::npos) << describe(c);
  EXPECT_EQ(c.fp8_gemm_tflops, 0.0) << "bf16 precision times no FP8 GEMM";
}

TEST(Calibrate, Fp8PrecisionAlsoMeasuresItsRecipesGemm) {
  const Mesh mesh = make_mesh(1, 0, 1, 1, 8);
  CpuDevice device(DType::kBf16);
  CpuOps ops(device);
  MpiComm comm(MPI_COMM_WORLD, mesh);
  for (Precision p : {Precision::kFp8Tensor, Precision::kFp8Block}) {
    const Calibration c = calibrate(device, ops, comm, DType::kBf16, p, MPI_COMM_WORLD);
    EXPECT_GT(c.fp8_gemm_tflops, 0.0) << name_of(p);
    EXPECT_LT(c.fp8_gemm_tflops, 100.0) << name_of(p);
    EXPECT_EQ(c.fp8_precision, name_of(p));
    EXPECT_NE(describe(c).find(std::string("in ") + name_of(p) + " "), std::string::npos)
        << describe(c);
  }
}

TEST(Calibrate, DescribeOff) { EXPECT_EQ(describe(Calibration{}), "off (roofline=false)"); }

}  // namespace
}  // namespace moe
