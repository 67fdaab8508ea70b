#pragma once
// The roofline calibration: a short measurement at start-up, on every rank and never inside the
// timed step, of this machine's dense GEMM rate in the workload's storage dtype, its memory
// bandwidth, and the EP group's all-to-all bandwidth, all through the backend's own Ops and Comm.
// The report sets each phase against the floor these give (app/roofline.h).
#include <mpi.h>

#include <cstdint>
#include <string>

#include "comm/comm.h"
#include "core/bounded_wait.h"
#include "core/device.h"
#include "core/ops.h"

namespace moe {

struct Calibration {
  bool done = false;       // false: not run (roofline=false); every other field is then 0
  double gemm_tflops = 0;  // dense GEMM rate of the slowest rank
  int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;
  std::string dtype;  // the GEMM's storage dtype (the workload's)
  // With an FP8 precision, the same GEMM in FP8 with its recipe's scaling (the slowest rank's):
  // the rate of the FP8 expert phases' floors. 0 and "" with bf16 precision, or where the backend
  // has no FP8 GEMM to time (the floors then take gemm_tflops).
  double fp8_gemm_tflops = 0;
  std::string fp8_precision;
  // nccl-tests conventions: algbw = bytes per rank / time (the slowest rank's), busbw = algbw *
  // (ep-1)/ep. Both 0 when ep == 1: there is no all-to-all to measure.
  double a2a_algbw_gbps = 0, a2a_busbw_gbps = 0;
  int64_t a2a_bytes_per_rank = 0;  // each rank's send buffer, its own chunk included
  int ep = 1;
  // Backend memory: bytes read plus bytes written per second by a large copy, the slowest rank's.
  double mem_gbps = 0;
  int64_t mem_copy_bytes = 0;
  double seconds = 0;  // wall time of the whole calibration
  bool has_a2a() const { return a2a_algbw_gbps > 0; }
};

// What the calibration runs on a backend: sizes large enough to be compute or bandwidth bound
// there, repetitions few enough that start-up stays short (well under a second on the CPU).
struct CalibrationSizes {
  int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;
  int gemm_iters = 0;
  int64_t a2a_bytes_per_rank = 0;
  int a2a_warmup = 0, a2a_iters = 0;
  int64_t mem_copy_bytes = 0;
  int mem_copy_iters = 0;
};
CalibrationSizes calibration_sizes(const std::string& backend);

// Collective over world (every rank calls it, after the backend is built). The GEMM rate is the
// minimum over ranks; each all-to-all's time is the maximum over ranks, as the step's phases are.
// Its own MPI reductions wait at most timeout_s for the other ranks (core/bounded_wait.h).
Calibration calibrate(Device& device, Ops& ops, Comm& comm, DType dtype, Precision precision,
                      MPI_Comm world, double timeout_s = kDefaultWaitBoundS);

// The median over iterations of the slowest rank's ms for one all-to-all of equal splits over the
// EP group, `rows_per_peer` rows of `row_bytes` to and from every EP rank, every rank starting
// each iteration together (as the step's phases do). Collective over world; allocates its buffers
// and frees them.
double equal_split_alltoall_ms(Device& device, Comm& comm, MPI_Comm world, double timeout_s,
                               int64_t rows_per_peer, size_t row_bytes, int warmup, int iters);
// The same for plain copies of `bytes_per_peer` bytes into every other EP rank's memory through a
// PeerWindow (comm/peer_window.h put: the copy engines over NVLink peer mappings on the CUDA
// backend, one peer after another), then the window's barrier: the peer-to-peer copy bandwidth
// the nvlink dispatcher's row moves are set against.
double peer_copy_ms(Device& device, Comm& comm, MPI_Comm world, double timeout_s,
                    size_t bytes_per_peer, int warmup, int iters);

// One line for the log and the report: rate, sizes, bandwidths.
std::string describe(const Calibration& c);

}  // namespace moe
