#pragma once
// The CUDA backend's device: GPU memory (exact high-water mark), copies through the current
// stream, seeded fills and digests computed on the GPU, CUDA-event timers, and two lanes: the
// main stream and a side stream ordered against it by two events. CudaOps and NcclComm issue
// their work on stream(), read at each call, so that whatever runs on the side lane (fork_side)
// is timed and ordered there.
#include <cuda_runtime.h>

#include <functional>
#include <unordered_map>

#include "core/device.h"

namespace moe {

class CudaDevice : public Device {
 public:
  // Selects `device` and creates the two streams.
  CudaDevice(int device, DType dtype);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  // The stream work goes to now: the main lane's, or the side lane's between fork_side() and
  // to_main().
  cudaStream_t stream() const { return stream_; }
  // Replaces cudaStreamSynchronize wherever the host waits, e.g. with NcclComm::wait, whose
  // timeout keeps a dead peer from hanging this rank (wired by app/backend.cpp).
  void set_waiter(std::function<void(const char*)> waiter) { waiter_ = std::move(waiter); }

  std::string name() const override { return "cuda"; }
  void* alloc(size_t bytes) override;
  void release(void* p) override;
  size_t bytes_of(DType t) const override;
  DType storage_dtype() const override { return dtype_; }
  void fill_seeded(void* dst, const InitRule& rule, int64_t begin, int64_t n) override;
  void download_floats(float* dst, const void* src, int64_t n, DType t) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  uint64_t digest(const void* src, size_t bytes) override;
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void sync() override;
  void fork_side() override;
  void to_main() override;
  void join_side() override;
  int64_t memory_high_water() const override { return high_water_; }
  void reset_memory_high_water() override { high_water_ = in_use_; }
  std::unique_ptr<PhaseTimer> make_timer(std::vector<std::string> phase_names) override;
  double time_memory_copy_ms(int64_t bytes, int iters) override;
  bool captures() const override { return true; }
  void begin_capture() override;
  void end_capture() override;
  void replay() override;
  void release_graph() override;
  int64_t host_waits() const override { return host_waits_; }
  void profiler_start() override;
  void profiler_stop() override;
  std::unique_ptr<ClockSampler> make_clock_sampler(std::string& why_none) override;

 private:
  int device_;
  DType dtype_;
  cudaStream_t stream_ = nullptr;  // the current lane: main_ or side_
  cudaStream_t main_ = nullptr, side_ = nullptr;
  cudaEvent_t forked_ = nullptr, side_done_ = nullptr;
  std::function<void(const char*)> waiter_;
  int64_t in_use_ = 0, high_water_ = 0;
  std::unordered_map<void*, size_t> sizes_;  // allocation sizes, for the exact high-water mark
  void* digest_sum_ = nullptr;               // the digest kernel's accumulator
  int64_t host_waits_ = 0;
  bool capturing_ = false;
  cudaGraphExec_t graph_ = nullptr;  // the captured step (graph: true)
};

}  // namespace moe
