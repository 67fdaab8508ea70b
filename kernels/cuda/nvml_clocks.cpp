#include "kernels/cuda/nvml_clocks.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace moe::cuda {
namespace {

// The few NVML entry points used, by their documented C signatures (nvml.h): handles are opaque
// pointers, results ints (0 success), clocks in MHz, power in milliwatts.
using NvmlDevice = void*;
using InitFn = int (*)();
using ShutdownFn = int (*)();
using ErrorStringFn = const char* (*)(int);
using HandleByPciFn = int (*)(const char*, NvmlDevice*);
using ClockInfoFn = int (*)(NvmlDevice, int, unsigned int*);
using UintFn = int (*)(NvmlDevice, unsigned int*);
using ReasonsFn = int (*)(NvmlDevice, unsigned long long*);
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM
// nvmlClocksEventReason* bits: the software power cap, the power brake; thermal slowdowns.
constexpr unsigned long long kPowerReasons = 0x4ull | 0x80ull;
constexpr unsigned long long kThermalReasons = 0x20ull | 0x40ull;

class NvmlClockSampler : public ClockSampler {
 public:
  NvmlClockSampler(void* lib, NvmlDevice dev, ShutdownFn shutdown, ClockInfoFn clock_info,
                   UintFn power_usage, ReasonsFn reasons, double limit_w)
      : lib_(lib),
        dev_(dev),
        shutdown_(shutdown),
        clock_info_(clock_info),
        power_usage_(power_usage),
        reasons_(reasons),
        limit_w_(limit_w),
        thread_([this] { loop(); }) {}
  ~NvmlClockSampler() override {
    stop();
    shutdown_();
    dlclose(lib_);
  }
  void set_on(bool on) override { on_ = on; }
  std::vector<ClockSample> finish() override {
    stop();
    std::lock_guard<std::mutex> lock(mutex_);
    return samples_;
  }
  double power_limit_w() const override { return limit_w_; }
  std::string source() const override { return "NVML"; }

 private:
  void stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void loop() {
    while (!done_) {
      if (on_) {
        ClockSample s;
        unsigned int mhz = 0, mw = 0;
        unsigned long long why = 0;
        const bool ok = clock_info_(dev_, kNvmlClockSm, &mhz) == 0 && power_usage_(dev_, &mw) == 0;
        if (reasons_ && reasons_(dev_, &why) != 0) why = 0;
        if (ok) {
          s.sm_mhz = mhz;
          s.power_w = mw / 1000.0;
          s.power_limited = (why & kPowerReasons) != 0;
          s.thermal_limited = (why & kThermalReasons) != 0;
          std::lock_guard<std::mutex> lock(mutex_);
          samples_.push_back(s);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kClockSampleIntervalMs));
    }
  }

  void* lib_;
  NvmlDevice dev_;
  ShutdownFn shutdown_;
  ClockInfoFn clock_info_;
  UintFn power_usage_;
  ReasonsFn reasons_;
  double limit_w_;
  std::atomic<bool> on_{false}, done_{false};
  std::mutex mutex_;
  std::vector<ClockSample> samples_;
  std::thread thread_;  // last: starts once the members above exist
};

template <class Fn>
Fn symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

}  // namespace

std::unique_ptr<ClockSampler> make_nvml_clock_sampler(int device, std::string& why_none) {
  char bus_id[32] = {0};
  if ((device < 0 && cudaGetDevice(&device) != cudaSuccess) ||
      cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != cudaSuccess) {
    why_none = "the CUDA runtime gave no PCI bus id for the device";
    return nullptr;
  }
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    why_none = "the driver's NVML library (libnvidia-ml.so.1) did not load";
    return nullptr;
  }
  const auto init = symbol<InitFn>(lib, "nvmlInit_v2");
  const auto shutdown = symbol<ShutdownFn>(lib, "nvmlShutdown");
  const auto error_string = symbol<ErrorStringFn>(lib, "nvmlErrorString");
  const auto by_pci = symbol<HandleByPciFn>(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  const auto clock_info = symbol<ClockInfoFn>(lib, "nvmlDeviceGetClockInfo");
  const auto power_usage = symbol<UintFn>(lib, "nvmlDeviceGetPowerUsage");
  const auto power_limit = symbol<UintFn>(lib, "nvmlDeviceGetEnforcedPowerLimit");
  // Renamed in newer drivers; either reads the same bits.
  auto reasons = symbol<ReasonsFn>(lib, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!reasons) reasons = symbol<ReasonsFn>(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
  // Every way out before the sampler owns the library: why, and the library closed (after NVML's
  // shutdown where it was initialised).
  bool initialised = false;
  auto fail = [&](const std::string& why) {
    why_none = why;
    if (initialised) shutdown();
    dlclose(lib);
    return nullptr;
  };
  auto nvml_error = [&](int rc) { return std::string(error_string ? error_string(rc) : "error"); };
  if (!init || !shutdown || !by_pci || !clock_info || !power_usage)
    return fail("the driver's NVML library lacks the clock and power queries");
  if (const int rc = init(); rc != 0) return fail("NVML: nvmlInit: " + nvml_error(rc));
  initialised = true;
  NvmlDevice dev = nullptr;
  if (const int rc = by_pci(bus_id, &dev); rc != 0)
    return fail("NVML: no device at the GPU's PCI bus id: " + nvml_error(rc));
  unsigned int limit_mw = 0;
  if (!power_limit || power_limit(dev, &limit_mw) != 0) limit_mw = 0;
  return std::make_unique<NvmlClockSampler>(lib, dev, shutdown, clock_info, power_usage, reasons,
                                            limit_mw / 1000.0);
}

}  // namespace moe::cuda
