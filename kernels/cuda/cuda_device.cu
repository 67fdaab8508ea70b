#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/digest.h"
#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/digest.h"
#include "kernels/cuda/nvml_clocks.h"
#include "kernels/cuda/storage.cuh"

namespace moe {
namespace {

// Phase times from CUDA events recorded on the backend's current stream (*stream: a phase run
// on the side lane is timed there). Each begin-end stretch takes a pair of events from a pool
// that grows in the first steps only (a pipelined step begins a phase once per chunk); every
// event is read against the step's first one, so the stretches of both lanes share one clock.
// Each phase is also an NVTX range named after it, so that Nsight Systems shows the phases on
// the timeline and Nsight Compute can filter kernels by them (--nvtx-include "experts_fwd/").
// Push and pop: the timer's users nest their phases on the host (core/device.h), and NVTX's
// push/pop ranges nest per host thread.
class EventTimer : public PhaseTimer {
 public:
  EventTimer(std::vector<std::string> names, const cudaStream_t* stream, cudaStream_t side,
             std::function<void()> wait)
      : names_(std::move(names)),
        stream_(stream),
        side_(side),
        wait_(std::move(wait)),
        open_(names_.size(), -1) {}
  ~EventTimer() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  void begin(int phase) override {
    nvtxRangePushA(names_[phase].c_str());
    const size_t n = recorded_.size();
    if (events_.size() < 2 * (n + 1)) {
      for (int i = 0; i < 2; ++i) {
        cudaEvent_t e = nullptr;
        CUDA_CHECK(cudaEventCreate(&e));
        events_.push_back(e);
      }
    }
    open_[phase] = int(n);
    recorded_.push_back({phase, *stream_ == side_ ? kSideLane : kMainLane, 0, 0});
    record(events_[2 * n]);
  }
  void end(int phase) override {
    record(events_[2 * size_t(open_[phase]) + 1]);
    nvtxRangePop();
  }
  std::vector<double> read() override {
    wait_();
    std::vector<double> ms(names_.size(), 0.0);
    for (size_t i = 0; i < recorded_.size(); ++i) {
      PhaseInterval& r = recorded_[i];
      r.begin_ms = since_first(events_[2 * i]);
      r.end_ms = since_first(events_[2 * i + 1]);
      ms[r.phase] += r.end_ms - r.begin_ms;
    }
    // Swapped, not copied: both vectors keep their capacity, so a steady step allocates nothing.
    intervals_.swap(recorded_);
    recorded_.clear();
    return ms;
  }
  const std::vector<PhaseInterval>& intervals() const override { return intervals_; }
  void replayed() override { recorded_ = intervals_; }

 private:
  // In a stream capture a plain record only orders streams and leaves the event unrecorded: an
  // external one becomes a node of the graph, recorded at each replay. Outside a capture the
  // external flag is refused.
  void record(cudaEvent_t e) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(*stream_, &capture));
    if (capture == cudaStreamCaptureStatusActive)
      CUDA_CHECK(cudaEventRecordWithFlags(e, *stream_, cudaEventRecordExternal));
    else
      CUDA_CHECK(cudaEventRecord(e, *stream_));
  }
  double since_first(cudaEvent_t e) const {
    float v = 0;
    CUDA_CHECK(cudaEventElapsedTime(&v, events_[0], e));
    return v;
  }
  std::vector<std::string> names_;
  const cudaStream_t* stream_;
  cudaStream_t side_;
  std::function<void()> wait_;
  std::vector<int> open_;            // per phase: its stretch begun last, in recorded_
  std::vector<cudaEvent_t> events_;  // stretch i: begin 2i, end 2i + 1
  std::vector<PhaseInterval> recorded_, intervals_;
};

}  // namespace

CudaDevice::CudaDevice(int device, DType dtype) : device_(device), dtype_(dtype) {
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaStreamCreateWithFlags(&main_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&side_done_, cudaEventDisableTiming));
  stream_ = main_;
}

CudaDevice::~CudaDevice() {
  release_graph();
  release(digest_sum_);
  for (cudaEvent_t e : {forked_, side_done_})
    if (e) cudaEventDestroy(e);
  for (cudaStream_t s : {main_, side_})
    if (s) cudaStreamDestroy(s);
}

void* CudaDevice::alloc(size_t bytes) {
  MOE_CHECK(!capturing_, "an allocation of " << bytes
                                             << " bytes inside a captured step (graph: true): the "
                                                "warm-up step before the capture must size it");
  void* p = nullptr;
  cudaError_t rc = cudaMalloc(&p, bytes);
  if (rc == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw_error(__FILE__, __LINE__,
                "out of GPU memory: cudaMalloc of " + std::to_string(bytes >> 20) + " MiB with " +
                    std::to_string(free_b >> 20) + " MiB free of " + std::to_string(total_b >> 20) +
                    " MiB: lower tokens_per_rank, or raise mesh.ep to spread the experts");
  }
  CUDA_CHECK(rc);
  CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  sizes_[p] = bytes;
  in_use_ += int64_t(bytes);
  high_water_ = std::max(high_water_, in_use_);
  return p;
}

void CudaDevice::release(void* p) {
  if (!p) return;
  auto it = sizes_.find(p);
  if (it != sizes_.end()) {
    in_use_ -= int64_t(it->second);
    sizes_.erase(it);
  }
  // Not checked: release runs in destructors, also while unwinding from a CUDA error that is
  // sticky, and a second report of it would only hide the first.
  cudaFree(p);
}

void CudaDevice::sync() {
  MOE_CHECK(!capturing_,
            "a host wait inside a captured step (graph: true): the step is not "
            "sync-free");
  ++host_waits_;
  if (waiter_)
    waiter_("the GPU stream");
  else
    CUDA_CHECK(cudaStreamSynchronize(stream_));
}

size_t CudaDevice::bytes_of(DType t) const { return cuda::stored_bytes(t); }

void CudaDevice::fork_side() {
  CUDA_CHECK(cudaEventRecord(forked_, main_));
  CUDA_CHECK(cudaStreamWaitEvent(side_, forked_, 0));
  stream_ = side_;
}

void CudaDevice::to_main() { stream_ = main_; }

void CudaDevice::join_side() {
  CUDA_CHECK(cudaEventRecord(side_done_, side_));
  CUDA_CHECK(cudaStreamWaitEvent(main_, side_done_, 0));
}

void CudaDevice::fill_seeded(void* dst, const InitRule& rule, int64_t begin, int64_t n) {
  cuda::fill_seeded(rule, begin, n, dtype_, dst, stream_);
}

void CudaDevice::download_floats(float* dst, const void* src, int64_t n, DType t) {
  if (t == DType::kBf16) {
    std::vector<uint16_t> b(n);
    copy_to_host(b.data(), src, 2 * n);
    for_each_part(n, part_count(n, 1 << 22), [&](int, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) dst[i] = bf16_bits_to_float(b[i]);
    });
  } else {
    copy_to_host(dst, src, 4 * n);
  }
}

void CudaDevice::copy_to_host(void* dst, const void* src, size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  sync();
}

uint64_t CudaDevice::digest(const void* src, size_t bytes) {
  if (!digest_sum_) digest_sum_ = alloc(sizeof(unsigned long long));
  auto* sum = static_cast<unsigned long long*>(digest_sum_);
  cuda::digest_sum(src, bytes, sum, stream_);
  unsigned long long host = 0;
  copy_to_host(&host, sum, sizeof host);
  return digest_finish(host, bytes);
}

void CudaDevice::copy_to_device(void* dst, const void* src, size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  sync();
}

std::unique_ptr<PhaseTimer> CudaDevice::make_timer(std::vector<std::string> phase_names) {
  return std::make_unique<EventTimer>(std::move(phase_names), &stream_, side_, [this] { sync(); });
}

// Thread-local: a call that is unsafe in a capture (an allocation, a sync) fails in this thread
// instead of being recorded, and other threads (MPI's progress) are left alone.
void CudaDevice::begin_capture() {
  MOE_CHECK(stream_ == main_ && !capturing_, "begin_capture: on the side lane, or capturing");
  CUDA_CHECK(cudaStreamBeginCapture(main_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
}

void CudaDevice::end_capture() {
  MOE_CHECK(capturing_, "end_capture without begin_capture");
  cudaGraph_t graph = nullptr;
  capturing_ = false;
  CUDA_CHECK(cudaStreamEndCapture(main_, &graph));
  if (graph_) CUDA_CHECK(cudaGraphExecDestroy(graph_));
  graph_ = nullptr;
  const cudaError_t rc = cudaGraphInstantiate(&graph_, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_CHECK(rc);
}

void CudaDevice::replay() {
  MOE_CHECK(graph_, "replay before a capture");
  CUDA_CHECK(cudaGraphLaunch(graph_, main_));
}

// Not checked: it runs in destructors, also while unwinding from a sticky CUDA error.
void CudaDevice::release_graph() {
  if (!graph_) return;
  cudaStreamSynchronize(main_);
  cudaGraphExecDestroy(graph_);
  graph_ = nullptr;
}

void CudaDevice::profiler_start() { CUDA_CHECK(cudaProfilerStart()); }

std::unique_ptr<ClockSampler> CudaDevice::make_clock_sampler(std::string& why_none) {
  return cuda::make_nvml_clock_sampler(device_, why_none);
}

void CudaDevice::profiler_stop() {
  // The profiled work must be inside the range when the profiler stops: wait for the GPU first.
  sync();
  CUDA_CHECK(cudaProfilerStop());
}

double CudaDevice::time_memory_copy_ms(int64_t bytes, int iters) {
  MOE_CHECK(bytes > 0 && iters > 0, "memory copy calibration " << bytes << " bytes, " << iters);
  void* src = alloc(size_t(bytes));
  void* dst = alloc(size_t(bytes));
  auto copy = [&] {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToDevice, stream_));
  };
  copy();
  const double ms = median_call_ms(*make_timer({"calibration_memory_copy"}), iters, copy);
  release(src);
  release(dst);
  return ms;
}

}  // namespace moe
