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

class HostTimer : public PhaseTimer {
 public:
  explicit HostTimer(int n) : start_(n), ms_(n, 0.0) {}
  void begin(int phase) override { start_[phase] = Clock::now(); }
  void end(int phase) override {
    ms_[phase] += std::chrono::duration<double, std::milli>(Clock::now() - start_[phase]).count();
  }
  std::vector<double> read() override {
    std::vector<double> out = ms_;
    std::fill(ms_.begin(), ms_.end(), 0.0);
    return out;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> start_;
  std::vector<double> ms_;
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
void CpuDevice::copy_to_host(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}
uint64_t CpuDevice::digest(const void* src, size_t bytes) { return digest_bytes(src, bytes); }
void CpuDevice::copy_to_device(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

std::unique_ptr<PhaseTimer> CpuDevice::make_timer(std::vector<std::string> phase_names) {
  return std::make_unique<HostTimer>(int(phase_names.size()));
}

double CpuDevice::time_memory_copy_ms(int64_t bytes, int iters) {
  MOE_CHECK(bytes > 0 && iters > 0, "memory copy calibration " << bytes << " bytes, " << iters);
  std::vector<char> src(bytes, 1), dst(bytes, 0);  // host vectors, as the GEMM's: not the step's
  auto copy = [&] { std::memcpy(dst.data(), src.data(), size_t(bytes)); };
  copy();  // untimed: faults the pages in
  return median_call_ms(*make_timer({"calibration_memory_copy"}), iters, copy);
}

}  // namespace moe
