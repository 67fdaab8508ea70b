#pragma once
// The CUDA backend's ClockSampler (core/clocks.h): the SM clock, power draw and the driver's
// clock-limiting reasons of one GPU, read through NVML. NVML is loaded at run time from the
// driver's libnvidia-ml.so.1 (every machine with an NVIDIA driver has it; the CUDA toolkit's
// headers and stubs need not be installed), so that the build depends on nothing more and a
// machine without it still runs, its report saying why there are no clocks.
#include <memory>
#include <string>

#include "core/clocks.h"

namespace moe::cuda {

// A sampler of CUDA device `device` (-1: the current one), or nullptr with why in `why_none`
// (NVML not found, or it does not know the device).
std::unique_ptr<ClockSampler> make_nvml_clock_sampler(int device, std::string& why_none);

}  // namespace moe::cuda
