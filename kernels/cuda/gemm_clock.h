#pragma once
// Device time per expert GEMM, for gemm.method auto's per-GEMM choice (app/gemm_choice.h): while
// on, each expert GEMM's calls (ExpertGemmScope, kernels/cuda/gemm_cublaslt.h) are bracketed by
// a pair of events on their stream, and take() sums the pairs per GEMM. Off (the timed steps,
// and any step a graph captures), it records nothing.
#include <cuda_runtime.h>

#include <vector>

#include "core/grouped_gemm.h"
#include "core/ops.h"

namespace moe::cuda {

class ExpertGemmClock {
 public:
  ExpertGemmClock() = default;
  ~ExpertGemmClock();
  ExpertGemmClock(const ExpertGemmClock&) = delete;
  ExpertGemmClock& operator=(const ExpertGemmClock&) = delete;

  void set_on(bool on) { on_ = on; }
  // Starts a span of GEMM g's work on `stream` and returns its index, or -1 when off.
  int begin(ExpertGemm g, cudaStream_t stream);
  // Ends span `span` (from begin(); -1 does nothing) after the work issued on `stream` since.
  void end(int span, cudaStream_t stream) noexcept;
  // Each GEMM's summed ms over the spans since the last take (0 for a GEMM without one), once
  // their work is done; NaN for all where there were no spans (the clock was off).
  ExpertGemmMs take();

 private:
  bool on_ = false;
  std::vector<cudaEvent_t> events_;  // two per span, made on first use and reused
  std::vector<ExpertGemm> spans_;    // since the last take
  cudaError_t end_error_ = cudaSuccess;
};

}  // namespace moe::cuda
