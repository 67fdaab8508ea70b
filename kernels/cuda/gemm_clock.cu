#include <limits>

#include "core/error.h"
#include "kernels/cuda/gemm_clock.h"

namespace moe::cuda {

ExpertGemmClock::~ExpertGemmClock() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

int ExpertGemmClock::begin(ExpertGemm g, cudaStream_t stream) {
  if (!on_) return -1;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  MOE_CHECK(capturing == cudaStreamCaptureStatusNone,
            "the expert GEMM clock runs in warm-up tries, never in a captured step");
  const size_t span = spans_.size();
  while (events_.size() < 2 * (span + 1)) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  spans_.push_back(g);
  CUDA_CHECK(cudaEventRecord(events_[2 * span], stream));
  return int(span);
}

void ExpertGemmClock::end(int span, cudaStream_t stream) noexcept {
  if (span < 0) return;
  // Called from a scope's destructor, so it does not throw: take() reports the failure.
  const cudaError_t rc = cudaEventRecord(events_[2 * size_t(span) + 1], stream);
  if (rc != cudaSuccess && end_error_ == cudaSuccess) end_error_ = rc;
}

ExpertGemmMs ExpertGemmClock::take() {
  if (end_error_ != cudaSuccess) {
    const cudaError_t rc = end_error_;
    end_error_ = cudaSuccess;
    MOE_CHECK(false, "cudaEventRecord of an expert GEMM span's end failed: "
                         << cudaGetErrorName(rc) << " (" << cudaGetErrorString(rc) << ")");
  }
  ExpertGemmMs ms;
  ms.fill(spans_.empty() ? std::numeric_limits<double>::quiet_NaN() : 0.0);
  for (size_t i = 0; i < spans_.size(); ++i) {
    CUDA_CHECK(cudaEventSynchronize(events_[2 * i + 1]));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, events_[2 * i], events_[2 * i + 1]));
    ms[size_t(spans_[i])] += double(t);
  }
  spans_.clear();
  return ms;
}

}  // namespace moe::cuda
