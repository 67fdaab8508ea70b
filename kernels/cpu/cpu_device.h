#pragma once
// The CPU backend's device: host memory (floats, rounded to the workload dtype where it is bf16),
// host copies, the host clock, and two lanes run as one: work runs as it is issued, and the timer
// labels it with the lane it was issued to, so that a schedule's lanes are reported (serially).
#include "core/device.h"

namespace moe {

class CpuDevice : public Device {
 public:
  explicit CpuDevice(DType dtype) : dtype_(dtype) {}
  std::string name() const override { return "cpu"; }
  void* alloc(size_t bytes) override;
  void release(void* p) override;
  size_t bytes_of(DType) const override { return sizeof(float); }
  DType storage_dtype() const override { return dtype_; }
  void fill_seeded(void* dst, const InitRule& rule, int64_t begin, int64_t n) override;
  void download_floats(float* dst, const void* src, int64_t n, DType t) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  uint64_t digest(const void* src, size_t bytes) override;
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void sync() override {}
  void fork_side() override { lane_ = kSideLane; }
  void to_main() override { lane_ = kMainLane; }
  int64_t memory_high_water() const override { return high_water_; }
  void reset_memory_high_water() override { high_water_ = in_use_; }
  std::unique_ptr<PhaseTimer> make_timer(std::vector<std::string> phase_names) override;
  int64_t host_waits() const override { return host_waits_; }
  double time_memory_copy_ms(int64_t bytes, int iters) override;

 private:
  DType dtype_;
  int64_t in_use_ = 0, high_water_ = 0;
  int lane_ = kMainLane;
  int64_t host_waits_ = 0;
};

}  // namespace moe
