#pragma once
// The memory-and-time half of a backend: allocation, copies, seeded fills and digests where the
// data lives, the lanes (streams) work is issued on, phase timers, the memory-bandwidth
// calibration and bounded waits. The compute phases are the Ops' (core/ops.h), the collectives
// the Comm's (comm/comm.h); both issue their work on the Device's current lane.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/clocks.h"
#include "core/init.h"
#include "core/stats.h"
#include "core/workload.h"

namespace moe {

// The lanes work is issued on (Device::fork_side): the main one, and one beside it.
enum Lane : int { kMainLane, kSideLane, kNumLanes };

// One stretch of a phase in a step: from its begin() to its end(), in ms from the step's first
// begin(), on the lane that was current at its begin().
struct PhaseInterval {
  int phase = 0;
  int lane = kMainLane;
  double begin_ms = 0, end_ms = 0;
};

// Times phases of one step on the backend's clock (host clock on CPU, CUDA events on GPU). A phase
// may be begun and ended several times a step (a pipelined step's chunks): its time is the sum.
class PhaseTimer {
 public:
  virtual ~PhaseTimer() = default;
  virtual void begin(int phase) = 0;
  virtual void end(int phase) = 0;
  // Milliseconds per phase for the last step (0 for phases not run); waits for the backend.
  virtual std::vector<double> read() = 0;
  // Every begin-end stretch of the step read() read last, in the order they were begun: what the
  // lanes' busy time and the exposed communication are measured from (core/lane_times.h).
  virtual const std::vector<PhaseInterval>& intervals() const = 0;
  // The stretches read() read last ran again, without begin() and end() (a replayed graph, whose
  // event records they are): the next read() reads them anew.
  virtual void replayed() {}
};

// Median ms of `iters` calls of fn, each timed alone as phase 0 of `timer` (for start-up
// measurements: reading the timer after every call waits for the backend).
inline double median_call_ms(PhaseTimer& timer, int iters, const std::function<void()>& fn) {
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    timer.begin(0);
    fn();
    timer.end(0);
    ms.push_back(timer.read()[0]);
  }
  return summarize(ms).median;
}

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;

  // Memory. Allocation happens at set-up and when a ragged buffer must grow, never in a steady
  // step.
  virtual void* alloc(size_t bytes) = 0;  // zero-filled; throws moe::Error naming the size on OOM
  virtual void release(void* p) = 0;
  // Bytes per element of a tensor of dtype t as the device keeps it (the CPU backend keeps
  // floats, rounded to bf16 where t is bf16).
  virtual size_t bytes_of(DType t) const = 0;
  virtual DType storage_dtype() const = 0;
  size_t storage_bytes() const { return bytes_of(storage_dtype()); }
  // dst [n] floats = src [n] elements of dtype t as the device keeps them.
  virtual void download_floats(float* dst, const void* src, int64_t n, DType t) = 0;
  void download_storage(float* dst, const void* src, int64_t n) {
    download_floats(dst, src, n, storage_dtype());
  }
  // dst [n] storage elements = rule.value(begin + i): seeded data made where it lives, so that
  // set-up neither generates billions of weights on the host nor uploads them.
  virtual void fill_seeded(void* dst, const InitRule& rule, int64_t begin, int64_t n) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;  // raw bytes, blocking
  // core/digest.h's digest of `bytes` bytes of device memory, computed where they live.
  virtual uint64_t digest(const void* src, size_t bytes) = 0;
  virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  // Waits for all work issued so far, within the run's bound (a dead peer must not hang a rank).
  virtual void sync() = 0;
  // A second lane of work beside the main one, for overlapping communication with compute.
  // fork_side(): later calls (Ops, the backend's Comm and the timer) go to the side lane, which
  // starts after all work issued so far; to_main(): later calls go to the main lane again;
  // join_side(): the main lane's later work waits for everything issued to the side lane. A
  // device that runs calls in order as they are issued (the CPU) keeps only which lane is
  // current, for its timer: the schedule is the same, run serially.
  virtual void fork_side() {}
  virtual void to_main() {}
  virtual void join_side() {}
  virtual int64_t memory_high_water() const = 0;  // bytes of device memory
  // Lowers the high-water mark to the bytes in use now, so that buffers a start-up measurement
  // allocated and released (the roofline calibration) do not count as the step's memory.
  virtual void reset_memory_high_water() = 0;
  // A timer of phase_names.size() phases. The names label the phases for profilers (the CUDA
  // backend opens an NVTX range named after the phase between begin and end); the phases a timer
  // times are begun and ended in nested order on the host.
  virtual std::unique_ptr<PhaseTimer> make_timer(std::vector<std::string> phase_names) = 0;
  // Start-up calibration: the median ms of one copy of `bytes` bytes from one device buffer to
  // another (each byte read once and written once), over `iters` calls after a warm-up call.
  virtual double time_memory_copy_ms(int64_t bytes, int iters) = 0;
  // CUDA graphs (graph: true): between begin_capture() and end_capture() the work issued on the
  // lanes, the timers' events with it, is recorded into a graph instead of run; replay() runs
  // the graph. Only where captures() (the CUDA backend): elsewhere the caller issues the work
  // again each time.
  virtual bool captures() const { return false; }
  virtual void begin_capture() {}
  virtual void end_capture() {}
  virtual void replay() {}
  // Waits for the graph's launches and frees it: its owner does, before the communicators whose
  // collectives it holds go (NCCL's destruction waits for every graph that holds its work).
  virtual void release_graph() {}
  // How often the host has waited for the device so far (a blocking copy to the host, a sync):
  // a step's count shows whether it is sync-free. The CPU backend counts its copies to the host.
  virtual int64_t host_waits() const { return 0; }
  // `run --profile`: an attached profiler (Nsight Systems with --capture-range=cudaProfilerApi,
  // Nsight Compute with --profile-from-start off) records only between start and stop. Nothing
  // to tell where there is no such profiler (the CPU backend).
  virtual void profiler_start() {}
  virtual void profiler_stop() {}
  // A sampler of this device's clocks and power (core/clocks.h), off until set on; nullptr, with
  // why in `why_none`, where there is none to read.
  virtual std::unique_ptr<ClockSampler> make_clock_sampler(std::string& why_none) {
    why_none = "the " + name() + " backend has no GPU clocks to sample";
    return nullptr;
  }
};

// Device memory of a ragged size, grow-only: reallocated (its contents lost) only when asked for
// more than it holds, released with it.
class GrownBuffer {
 public:
  explicit GrownBuffer(Device& device) : device_(device) {}
  ~GrownBuffer() { device_.release(ptr_); }
  GrownBuffer(const GrownBuffer&) = delete;
  GrownBuffer& operator=(const GrownBuffer&) = delete;
  // At least `bytes`; where it must grow, `allocate` bytes if that is more (room for the growth
  // to come, which the caller plans).
  void* at_least(size_t bytes, size_t allocate = 0) {
    if (bytes > bytes_ || !ptr_) {
      device_.release(ptr_);
      ptr_ = nullptr;
      bytes_ = std::max<size_t>({bytes, allocate, 1});
      ptr_ = device_.alloc(bytes_);
    }
    return ptr_;
  }
  void* ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  Device& device_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace moe
