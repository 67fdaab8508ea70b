#include "app/calibrate.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/fp8.h"

namespace moe {
namespace {

// Rows of the calibration all-to-all: a size that divides the buffers of any EP width evenly.
constexpr int64_t kA2aRowBytes = 4096;

Calibration measure(Device& device, Ops& ops, Comm& comm, DType dtype, Precision precision,
                    MPI_Comm world, double timeout_s) {
  const CalibrationSizes s = calibration_sizes(ops.name());
  Calibration c;
  c.gemm_m = s.gemm_m;
  c.gemm_n = s.gemm_n;
  c.gemm_k = s.gemm_k;
  c.dtype = dtype_name(dtype);
  // All ranks compute at once, as in the step: ranks that share a host's cores (the CPU backend)
  // then measure the rate they get while the others run too.
  device.sync();
  barrier_bounded(world, "the calibration's barrier", timeout_s);
  const double gemm_ms = ops.time_dense_gemm_ms(s.gemm_m, s.gemm_n, s.gemm_k, s.gemm_iters);
  MOE_CHECK(gemm_ms > 0, "dense GEMM calibration took " << gemm_ms << " ms");
  c.gemm_tflops = 2.0 * s.gemm_m * s.gemm_n * s.gemm_k / (gemm_ms * 1e-3) * 1e-12;
  allreduce_bounded(&c.gemm_tflops, 1, MPI_DOUBLE, MPI_MIN, world, "the calibration's minimum",
                    timeout_s);
  if (precision != Precision::kBf16) {
    const double fp8_ms = ops.time_dense_fp8_gemm_ms(s.gemm_m, s.gemm_n, s.gemm_k,
                                                     fp8_recipe_of(precision), s.gemm_iters);
    // A backend without one gives 0 on every rank: the minimum stays 0.
    c.fp8_gemm_tflops =
        fp8_ms > 0 ? 2.0 * s.gemm_m * s.gemm_n * s.gemm_k / (fp8_ms * 1e-3) * 1e-12 : 0;
    allreduce_bounded(&c.fp8_gemm_tflops, 1, MPI_DOUBLE, MPI_MIN, world,
                      "the calibration's minimum", timeout_s);
    if (c.fp8_gemm_tflops > 0) c.fp8_precision = name_of(precision);
  }

  c.mem_copy_bytes = s.mem_copy_bytes;
  const double copy_ms = device.time_memory_copy_ms(s.mem_copy_bytes, s.mem_copy_iters);
  MOE_CHECK(copy_ms > 0, "memory copy calibration took " << copy_ms << " ms");
  c.mem_gbps = 2.0 * s.mem_copy_bytes / (copy_ms * 1e-3) * 1e-9;
  allreduce_bounded(&c.mem_gbps, 1, MPI_DOUBLE, MPI_MIN, world, "the calibration's minimum",
                    timeout_s);

  c.ep = comm.size(Group::kEp);
  if (c.ep > 1) {
    const int64_t rows_per_peer =
        std::max<int64_t>(1, s.a2a_bytes_per_rank / (c.ep * kA2aRowBytes));
    c.a2a_bytes_per_rank = rows_per_peer * c.ep * kA2aRowBytes;
    const double ms = equal_split_alltoall_ms(device, comm, world, timeout_s, rows_per_peer,
                                              kA2aRowBytes, s.a2a_warmup, s.a2a_iters);
    MOE_CHECK(ms > 0, "all-to-all calibration took " << ms << " ms");
    c.a2a_algbw_gbps = c.a2a_bytes_per_rank / (ms * 1e-3) * 1e-9;
    c.a2a_busbw_gbps = c.a2a_algbw_gbps * (c.ep - 1) / c.ep;
  }
  c.done = true;
  return c;
}

}  // namespace

namespace {

// The median over iterations of the slowest rank's ms for one call of fn, every rank starting
// each iteration together (as the step's phases do).
double slowest_rank_median_ms(Device& device, MPI_Comm world, double timeout_s, const char* name,
                              int warmup, int iters, const std::function<void()>& fn) {
  std::unique_ptr<PhaseTimer> timer = device.make_timer({name});
  std::vector<double> ms;
  for (int i = 0; i < warmup + iters; ++i) {
    device.sync();
    barrier_bounded(world, "a bandwidth measurement's barrier", timeout_s);
    timer->begin(0);
    fn();
    timer->end(0);
    double t = timer->read()[0];
    allreduce_bounded(&t, 1, MPI_DOUBLE, MPI_MAX, world, "a bandwidth measurement's maximum",
                      timeout_s);
    if (i >= warmup) ms.push_back(t);
  }
  return summarize(ms).median;
}

}  // namespace

double equal_split_alltoall_ms(Device& device, Comm& comm, MPI_Comm world, double timeout_s,
                               int64_t rows_per_peer, size_t row_bytes, int warmup, int iters) {
  const int ep = comm.size(Group::kEp);
  const size_t bytes = size_t(rows_per_peer * ep) * row_bytes;
  void* send = device.alloc(bytes);
  void* recv = device.alloc(bytes);
  const std::vector<int64_t> rows(ep, rows_per_peer);
  const double ms = slowest_rank_median_ms(
      device, world, timeout_s, "equal_split_alltoall", warmup, iters,
      [&] { comm.alltoallv_rows(send, rows.data(), recv, rows.data(), row_bytes, Group::kEp); });
  device.release(send);
  device.release(recv);
  return ms;
}

double peer_copy_ms(Device& device, Comm& comm, MPI_Comm world, double timeout_s,
                    size_t bytes_per_peer, int warmup, int iters) {
  const int ep = comm.size(Group::kEp);
  std::unique_ptr<PeerWindow> window = comm.open_window(bytes_per_peer * size_t(ep), Group::kEp);
  void* send = device.alloc(bytes_per_peer);
  const int me = window->rank();
  const double ms =
      slowest_rank_median_ms(device, world, timeout_s, "peer_copy", warmup, iters, [&] {
        for (int r = 0; r < ep; ++r)
          if (r != me) window->put(r, bytes_per_peer * size_t(me), send, bytes_per_peer);
        window->barrier();
      });
  device.release(send);
  return ms;
}

CalibrationSizes calibration_sizes(const std::string& backend) {
  CalibrationSizes s;
  if (backend == "cuda") {
    // 8192^3 keeps the tensor cores busy (about 1.1 TFLOP a call); 256 MiB per rank puts the
    // all-to-all well past NCCL's latency-bound sizes.
    s.gemm_m = s.gemm_n = s.gemm_k = 8192;
    s.gemm_iters = 20;
    s.a2a_bytes_per_rank = int64_t(256) << 20;
    s.a2a_warmup = 5;
    s.a2a_iters = 20;
    s.mem_copy_bytes = int64_t(1) << 30;  // far past the L2
    s.mem_copy_iters = 10;
  } else {
    // The CPU GEMM runs 512^3 in about 15 ms on one core; a few MiB per rank is past MPI's
    // shared-memory latency.
    s.gemm_m = s.gemm_n = s.gemm_k = 512;
    s.gemm_iters = 5;
    s.a2a_bytes_per_rank = int64_t(4) << 20;
    s.a2a_warmup = 2;
    s.a2a_iters = 10;
    s.mem_copy_bytes = int64_t(64) << 20;  // past the last-level caches
    s.mem_copy_iters = 3;
  }
  return s;
}

Calibration calibrate(Device& device, Ops& ops, Comm& comm, DType dtype, Precision precision,
                      MPI_Comm world, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  Calibration c;
  try {
    c = measure(device, ops, comm, dtype, precision, world, timeout_s);
  } catch (const UserError&) {
    throw;
  } catch (const Error& e) {
    // Out of memory here would otherwise suggest fixes for the step's buffers.
    throw Error(std::string(e.what()) +
                "; this was the roofline calibration at start-up: --set roofline=false skips it");
  }
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return c;
}

std::string describe(const Calibration& c) {
  if (!c.done) return "off (roofline=false)";
  char gemm[240], a2a[160], mem[96];
  std::snprintf(gemm, sizeof gemm,
                "dense GEMM %.3f TFLOP/s per rank (%ldx%ldx%ld %s, slowest rank)", c.gemm_tflops,
                long(c.gemm_m), long(c.gemm_n), long(c.gemm_k), c.dtype.c_str());
  if (c.fp8_gemm_tflops > 0)
    std::snprintf(gemm + std::strlen(gemm), sizeof gemm - std::strlen(gemm), ", in %s %.3f TFLOP/s",
                  c.fp8_precision.c_str(), c.fp8_gemm_tflops);
  std::snprintf(a2a, sizeof a2a,
                "all-to-all over ep %d: algbw %.3f GB/s, busbw %.3f GB/s at %.1f MiB per rank",
                c.ep, c.a2a_algbw_gbps, c.a2a_busbw_gbps, c.a2a_bytes_per_rank / 1048576.0);
  std::snprintf(mem, sizeof mem, "memory %.1f GB/s (read + write, %.0f MiB copy, slowest rank)",
                c.mem_gbps, c.mem_copy_bytes / 1048576.0);
  char took[32];
  std::snprintf(took, sizeof took, "%.2f s", c.seconds);
  return std::string(gemm) + "; " + mem + "; " +
         (c.has_a2a() ? a2a : "all-to-all not applicable (ep 1)") + "; " + took;
}

}  // namespace moe
