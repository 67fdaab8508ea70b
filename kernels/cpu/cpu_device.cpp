#include "kernels/cpu/cpu_device.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/digest.h"
#include "core/error.h"

namespace moe {
namespace {

// Host-clock intervals, each labelled with the lane the device had current at its begin (the
// CPU runs both lanes' work in issue order, so they never overlap in time).
class HostTimer : public PhaseTimer {
 public:
  HostTimer(int n, const int* lane) : lane_(lane), open_(n, -1) {}
  void begin(int phase) override {
    const Clock::time_point now = Clock::now();
    if (recorded_.empty()) origin_ = now;
    open_[phase] = int(recorded_.size());
    recorded_.push_back({phase, *lane_, ms_since_origin(now), 0});
  }
  void end(int phase) override { recorded_[open_[phase]].end_ms = ms_since_origin(Clock::now()); }
  std::vector<double> read() override {
    std::vector<double> ms(open_.size(), 0.0);
    for (const PhaseInterval& i : recorded_) ms[i.phase] += i.end_ms - i.begin_ms;
    // Swapped, not copied: both vectors keep their capacity, so a steady step allocates nothing.
    intervals_.swap(recorded_);
    recorded_.clear();
    return ms;
  }
  const std::vector<PhaseInterval>& intervals() const override { return intervals_; }

 private:
  using Clock = std::chrono::steady_clock;
  double ms_since_origin(Clock::time_point t) const {
    return std::chrono::duration<double, std::milli>(t - origin_).count();
  }
  const int* lane_;
  std::vector<int> open_;  // per phase: its interval begun last, in recorded_
  Clock::time_point origin_;
  std::vector<PhaseInterval> recorded_, intervals_;
};

}  // namespace

void* CpuDevice::alloc(size_t bytes) {
  // A size header in front of each block lets release() keep the high-water mark exact.
  void* raw = std::calloc(1, bytes + 64);
  if (!raw)
    throw_error(__FILE__, __LINE__,
                "out of host memory allocating " + std::to_string(bytes >> 20) +
                    " MiB: lower tokens_per_rank, or raise mesh.ep to spread the experts");
  *static_cast<size_t*>(raw) = bytes;
  in_use_ += int64_t(bytes);
  high_water_ = std::max(high_water_, in_use_);
  return static_cast<char*>(raw) + 64;
}

void CpuDevice::release(void* p) {
  if (!p) return;
  void* raw = static_cast<char*>(p) - 64;
  in_use_ -= int64_t(*static_cast<size_t*>(raw));
  std::free(raw);
}

void CpuDevice::fill_seeded(void* dst, const InitRule& rule, int64_t begin, int64_t n) {
  init_range(rule, begin, begin + n, static_cast<float*>(dst));  // storage is float here
}
void CpuDevice::download_floats(float* dst, const void* src, int64_t n, DType) {
  std::memcpy(dst, src, sizeof(float) * n);  // floats of any dtype here
}
// The copies count as the waits they are on the CUDA backend (blocking both ways), so that the
// CPU run of a step shows the same count.
void CpuDevice::copy_to_host(void* dst, const void* src, size_t bytes) {
  ++host_waits_;
  std::memcpy(dst, src, bytes);
}
uint64_t CpuDevice::digest(const void* src, size_t bytes) { return digest_bytes(src, bytes); }
void CpuDevice::copy_to_device(void* dst, const void* src, size_t bytes) {
  ++host_waits_;
  std::memcpy(dst, src, bytes);
}

std::unique_ptr<PhaseTimer> CpuDevice::make_timer(std::vector<std::string> phase_names) {
  return std::make_unique<HostTimer>(int(phase_names.size()), &lane_);
}

double CpuDevice::time_memory_copy_ms(int64_t bytes, int iters) {
  MOE_CHECK(bytes > 0 && iters > 0, "memory copy calibration " << bytes << " bytes, " << iters);
  std::vector<char> src(bytes, 1), dst(bytes, 0);  // host vectors, as the GEMM's: not the step's
  auto copy = [&] { std::memcpy(dst.data(), src.data(), size_t(bytes)); };
  copy();  // untimed: faults the pages in
  return median_call_ms(*make_timer({"calibration_memory_copy"}), iters, copy);
}

}  // namespace moe
