#include <cuda_bf16.h>

#include <cstdlib>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/bf16.h"
#include "core/digest.h"
#include "core/parallel.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/digest.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/router.h"
#include "kernels/cuda/storage.cuh"

namespace moe {
namespace {

enum ScratchSlot {
  kRouterScratch,
  kWGateF32,
  kXF32,
  kRegroupOffsets,
  kLayoutScratch,
  kDigestSum,
  kNumScratchSlots
};

// Phase times from CUDA events recorded on the backend's current stream (*stream: a phase run
// on the side lane is timed there).
class EventTimer : public PhaseTimer {
 public:
  EventTimer(int n, const cudaStream_t* stream, std::function<void()> wait)
      : stream_(stream), wait_(std::move(wait)), begin_(n), end_(n), used_(n, false) {
    for (int i = 0; i < n; ++i) {
      CUDA_CHECK(cudaEventCreate(&begin_[i]));
      CUDA_CHECK(cudaEventCreate(&end_[i]));
    }
  }
  ~EventTimer() override {
    for (size_t i = 0; i < begin_.size(); ++i) {
      cudaEventDestroy(begin_[i]);
      cudaEventDestroy(end_[i]);
    }
  }
  void begin(int phase) override { CUDA_CHECK(cudaEventRecord(begin_[phase], *stream_)); }
  void end(int phase) override {
    CUDA_CHECK(cudaEventRecord(end_[phase], *stream_));
    used_[phase] = true;
  }
  std::vector<double> read() override {
    wait_();
    std::vector<double> ms(begin_.size(), 0.0);
    for (size_t i = 0; i < begin_.size(); ++i) {
      if (!used_[i]) continue;
      float v = 0;
      CUDA_CHECK(cudaEventElapsedTime(&v, begin_[i], end_[i]));
      ms[i] = v;
      used_[i] = false;
    }
    return ms;
  }

 private:
  const cudaStream_t* stream_;
  std::function<void()> wait_;
  std::vector<cudaEvent_t> begin_, end_;
  std::vector<bool> used_;
};

// Operands of the calibration GEMM: a fixed pattern in [-0.5, 0.5), never zero-filled, so that
// the tensor cores toggle (and draw power) as they do on real data.
template <class S>
__global__ void calibration_fill_kernel(S* dst, int64_t n, uint32_t salt) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = (uint32_t(i) ^ salt) * 2654435761u;
    h ^= h >> 16;
    cuda::store_f(dst + i, float(h & 0xffff) / 65536.0f - 0.5f);
  }
}

void calibration_fill(void* dst, int64_t n, uint32_t salt, DType dtype, cudaStream_t stream) {
  cuda::with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    calibration_fill_kernel<<<1024, 256, 0, stream>>>(static_cast<S*>(dst), n, salt);
  });
  CUDA_CHECK(cudaGetLastError());
}

size_t offset_of(DType t, int64_t elems) { return size_t(elems) * cuda::stored_bytes(t); }
size_t storage_offset(const Dims& d, int64_t elems) { return offset_of(d.dtype, elems); }
const char* at(const void* p, size_t bytes) { return static_cast<const char*>(p) + bytes; }
// An emptied list that keeps its capacity: the expert GEMM lists allocate in warm-up only.
std::vector<cuda::GemmProblem>& reuse(std::vector<cuda::GemmProblem>& v) {
  v.clear();
  return v;
}
char* at(void* p, size_t bytes) { return static_cast<char*>(p) + bytes; }

}  // namespace

CudaOps::CudaOps(int device, DType dtype, const GemmConfig& gemm)
    : dtype_(dtype), scratch_(kNumScratchSlots) {
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaStreamCreateWithFlags(&main_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&side_done_, cudaEventDisableTiming));
  stream_ = main_;
  gemm_ = std::make_unique<cuda::GemmRunner>(int(gemm.streams));
  fixed_gemm_method_ = gemm.method != GemmMethod::kAuto;
  if (fixed_gemm_method_) set_expert_gemm_method(name_of(gemm.method));
  gemm_->set_algo_policy(gemm.algo == GemmAlgo::kBucket  ? cuda::AlgoPolicy::kBucket
                         : gemm.algo == GemmAlgo::kExact ? cuda::AlgoPolicy::kExact
                                                         : cuda::AlgoPolicy::kAuto);
}

GemmPlanCounts CudaOps::gemm_plan_counts() const {
  return {int64_t(gemm_->num_cached_plans()), gemm_->num_heuristic_queries()};
}

std::vector<std::string> CudaOps::expert_gemm_methods() const {
  if (fixed_gemm_method_) return {};
  return {cuda::gemm_method_name(cuda::GemmMethod::kLtMultiStream),
          cuda::gemm_method_name(cuda::GemmMethod::kGroupedBatched)};
}

void CudaOps::set_expert_gemm_method(const std::string& name) {
  for (cuda::GemmMethod m : {cuda::GemmMethod::kLtMultiStream, cuda::GemmMethod::kGroupedBatched})
    if (name == cuda::gemm_method_name(m)) {
      gemm_->set_method(m);
      return;
    }
  MOE_CHECK(false, "unknown expert GEMM method " << name);
}

CudaOps::~CudaOps() {
  for (Scratch& s : scratch_) release(s.ptr);
  gemm_.reset();
  for (cudaEvent_t e : {forked_, side_done_})
    if (e) cudaEventDestroy(e);
  for (cudaStream_t s : {main_, side_})
    if (s) cudaStreamDestroy(s);
}

void* CudaOps::alloc(size_t bytes) {
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

void CudaOps::release(void* p) {
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

void CudaOps::sync() {
  if (waiter_)
    waiter_("the GPU stream");
  else
    CUDA_CHECK(cudaStreamSynchronize(stream_));
}

size_t CudaOps::bytes_of(DType t) const { return cuda::stored_bytes(t); }

void CudaOps::fork_side() {
  CUDA_CHECK(cudaEventRecord(forked_, main_));
  CUDA_CHECK(cudaStreamWaitEvent(side_, forked_, 0));
  stream_ = side_;
}

void CudaOps::to_main() { stream_ = main_; }

void CudaOps::join_side() {
  CUDA_CHECK(cudaEventRecord(side_done_, side_));
  CUDA_CHECK(cudaStreamWaitEvent(main_, side_done_, 0));
}

void CudaOps::fill_seeded(void* dst, const InitRule& rule, int64_t begin, int64_t n) {
  cuda::fill_seeded(rule, begin, n, dtype_, dst, stream_);
}

void CudaOps::download_floats(float* dst, const void* src, int64_t n, DType t) {
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

void CudaOps::copy_to_host(void* dst, const void* src, size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  sync();
}

uint64_t CudaOps::digest(const void* src, size_t bytes) {
  auto* sum = static_cast<unsigned long long*>(scratch(kDigestSum, sizeof(unsigned long long)));
  cuda::digest_sum(src, bytes, sum, stream_);
  unsigned long long host = 0;
  copy_to_host(&host, sum, sizeof host);
  return digest_finish(host, bytes);
}

void CudaOps::copy_to_device(void* dst, const void* src, size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  sync();
}

std::unique_ptr<PhaseTimer> CudaOps::make_timer(int num_phases) {
  return std::make_unique<EventTimer>(num_phases, &stream_, [this] { sync(); });
}

double CudaOps::time_dense_gemm_ms(int64_t M, int64_t N, int64_t K, int iters) {
  MOE_CHECK(M > 0 && N > 0 && K > 0 && iters > 0,
            "dense GEMM calibration " << M << "x" << N << "x" << K << ", " << iters << " iters");
  const size_t sb = storage_bytes();
  void* a = alloc(sb * M * K);
  void* b = alloc(sb * K * N);
  void* c = alloc(sb * M * N);
  calibration_fill(a, M * K, 1, dtype_, stream_);
  calibration_fill(b, K * N, 2, dtype_, stream_);
  auto gemm = [&] { gemm_->gemm(false, false, M, N, K, a, b, c, false, dtype_, dtype_, stream_); };
  gemm();  // untimed: builds the cuBLASLt plan and wakes the clocks
  const double ms = median_call_ms(*make_timer(1), iters, gemm);
  release(a);
  release(b);
  release(c);
  return ms;
}

double CudaOps::time_memory_copy_ms(int64_t bytes, int iters) {
  MOE_CHECK(bytes > 0 && iters > 0, "memory copy calibration " << bytes << " bytes, " << iters);
  void* src = alloc(size_t(bytes));
  void* dst = alloc(size_t(bytes));
  auto copy = [&] {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToDevice, stream_));
  };
  copy();
  const double ms = median_call_ms(*make_timer(1), iters, copy);
  release(src);
  release(dst);
  return ms;
}

void* CudaOps::scratch(int slot, size_t bytes) {
  Scratch& s = scratch_[slot];
  if (bytes > s.bytes || !s.ptr) {
    release(s.ptr);
    s.bytes = std::max<size_t>(bytes, 16);
    s.ptr = alloc(s.bytes);
  }
  return s.ptr;
}

void CudaOps::router_fwd(const Dims& d, const RouterConfig& cfg, const void* x, const void* w_gate,
                         const float* expert_bias, const int32_t* forced_idx, float* logits,
                         float* scores, int32_t* idx, float* p, float* stats) {
  // logits in fp32 from the stored values: bf16 products are exact in fp32.
  gemm_->gemm(false, false, d.T, d.E, d.H, x, w_gate, logits, false, d.dtype, DType::kFp32,
              stream_);
  cuda::router_topk(logits, expert_bias, forced_idx, cfg, d.T, d.E, d.K, scores, idx, p, stream_);
  void* tmp = scratch(kRouterScratch, cuda::router_loss_stats_scratch_bytes(d.T, d.E));
  cuda::router_loss_stats(logits, scores, idx, cfg, d.T, d.E, d.K, stats, tmp, stream_);
}

void CudaOps::router_bwd(const Dims& d, const RouterConfig& cfg, const void* x, const void* w_gate,
                         const float* logits, const float* scores, const int32_t* idx,
                         const float* dp, const float* global_stats, float* dlogits, float* dx_acc,
                         void* dx, float* dw_gate) {
  cuda::router_bwd(logits, scores, idx, dp, global_stats, cfg, d.N, d.T, d.E, d.K, dlogits,
                   stream_);
  // The router's backward GEMMs run in fp32 (no TF32), as on the CPU: dlogits is fp32, so its
  // partners are widened from storage first.
  float* w_gate_f32 = static_cast<float*>(scratch(kWGateF32, 4 * d.H * d.E));
  float* x_f32 = static_cast<float*>(scratch(kXF32, 4 * d.T * d.H));
  cuda::storage_to_f32(w_gate, d.H * d.E, d.dtype, w_gate_f32, stream_);
  cuda::storage_to_f32(x, d.T * d.H, d.dtype, x_f32, stream_);
  gemm_->gemm(false, true, d.T, d.H, d.E, dlogits, w_gate_f32, dx_acc, true, DType::kFp32,
              DType::kFp32, stream_);
  gemm_->gemm(true, false, d.H, d.E, d.T, x_f32, dlogits, dw_gate, false, DType::kFp32,
              DType::kFp32, stream_);
  cuda::f32_to_storage(dx_acc, d.T * d.H, d.dtype, dx, stream_);
}

void CudaOps::dispatch_layout(const Dims& d, const int32_t* idx, const float* p,
                              int32_t* expert_counts, int32_t* send_pos) {
  // Only dropping by probability uses scratch: T, K and E are fixed, so the first (warm-up) step
  // allocates it and later steps reuse it, as with the router's.
  void* tmp = d.capacity > 0 && !d.drop_by_position
                  ? scratch(kLayoutScratch, cuda::dispatch_layout_scratch_bytes(d.T, d.K, d.E))
                  : nullptr;
  cuda::dispatch_layout(idx, p, d.T, d.K, d.E, d.capacity, d.drop_by_position, expert_counts,
                        send_pos, tmp, stream_);
}

void CudaOps::permute(const Dims& d, const void* x, const int32_t* send_pos, void* send) {
  cuda::permute_rows(x, send_pos, d.T, d.K, d.H, d.dtype, send, stream_);
}

void CudaOps::regroup(const Dims& d, const void* src, const int32_t* counts,
                      const int32_t* counts_host, bool to_expert_major, void* dst) {
  int64_t rows = 0;
  for (int64_t i = 0; i < d.ep * d.E_local; ++i) rows += counts_host[i];
  auto* offsets = static_cast<int64_t*>(scratch(kRegroupOffsets, 16 * d.ep * d.E_local));
  cuda::regroup_rows(src, counts, d.ep, d.E_local, d.H, d.align, rows, to_expert_major, d.dtype,
                     offsets, dst, stream_);
}

void CudaOps::expert_ffn_fwd(const Dims& d, const void* xe, const void* w_in, const void* w_out,
                             const int64_t* off, void* h, void* a, void* ye) {
  const int64_t H = d.H, F = d.F;
  auto& up = reuse(problems_[0]);
  auto& down = reuse(problems_[1]);
  for (int64_t l = 0; l < d.E_local; ++l) {
    const int64_t r0 = off[l], n = off[l + 1] - off[l];
    if (n == 0) continue;
    up.push_back({n, 2 * F, H, at(xe, storage_offset(d, r0 * H)),
                  at(w_in, storage_offset(d, l * H * 2 * F)),
                  at(h, storage_offset(d, r0 * 2 * F))});
    down.push_back({n, H, F, at(a, storage_offset(d, r0 * F)),
                    at(w_out, storage_offset(d, l * F * H)), at(ye, storage_offset(d, r0 * H))});
  }
  const int64_t rows = off[d.E_local];
  gemm_->grouped(false, false, up, false, d.dtype, d.dtype, stream_);
  cuda::swiglu_fwd(h, rows, F, d.dtype, a, stream_);
  gemm_->grouped(false, false, down, false, d.dtype, d.dtype, stream_);
}

void CudaOps::expert_ffn_bwd_data(const Dims& d, const void* dye, const void* h, const void* w_in,
                                  const void* w_out, const int64_t* off, void* da, void* dh,
                                  void* dxe) {
  const int64_t H = d.H, F = d.F;
  auto& dgrad_a = reuse(problems_[0]);
  auto& dgrad_x = reuse(problems_[1]);
  for (int64_t l = 0; l < d.E_local; ++l) {
    const int64_t r0 = off[l], n = off[l + 1] - off[l];
    if (n == 0) continue;
    dgrad_a.push_back({n, F, H, at(dye, storage_offset(d, r0 * H)),
                       at(w_out, storage_offset(d, l * F * H)), at(da, storage_offset(d, r0 * F))});
    dgrad_x.push_back({n, H, 2 * F, at(dh, storage_offset(d, r0 * 2 * F)),
                       at(w_in, storage_offset(d, l * H * 2 * F)),
                       at(dxe, storage_offset(d, r0 * H))});
  }
  gemm_->grouped(false, true, dgrad_a, false, d.dtype, d.dtype, stream_);
  cuda::swiglu_bwd(da, h, off[d.E_local], F, d.dtype, dh, stream_);
  gemm_->grouped(false, true, dgrad_x, false, d.dtype, d.dtype, stream_);
}

void CudaOps::expert_ffn_bwd_weights(const Dims& d, const void* dye, const void* xe, const void* a,
                                     const void* dh, const int64_t* off, void* dw_in,
                                     void* dw_out) {
  const int64_t H = d.H, F = d.F;
  auto& wgrad_out = reuse(problems_[0]);
  auto& wgrad_in = reuse(problems_[1]);
  for (int64_t l = 0; l < d.E_local; ++l) {
    const int64_t r0 = off[l], n = off[l + 1] - off[l];
    // Every expert: one with no rows gets zeros (K = 0).
    wgrad_out.push_back({F, H, n, at(a, storage_offset(d, r0 * F)),
                         at(dye, storage_offset(d, r0 * H)),
                         at(dw_out, offset_of(d.grad_dtype, l * F * H))});
    wgrad_in.push_back({H, 2 * F, n, at(xe, storage_offset(d, r0 * H)),
                        at(dh, storage_offset(d, r0 * 2 * F)),
                        at(dw_in, offset_of(d.grad_dtype, l * H * 2 * F))});
  }
  gemm_->grouped(true, false, wgrad_out, false, d.dtype, d.grad_dtype, stream_);
  gemm_->grouped(true, false, wgrad_in, false, d.dtype, d.grad_dtype, stream_);
}

void CudaOps::combine_fwd(const Dims& d, const void* y_send, const int32_t* send_pos,
                          const float* p, void* out) {
  cuda::unpermute_combine(y_send, send_pos, p, d.T, d.K, d.H, d.dtype, out, stream_);
}

void CudaOps::combine_bwd(const Dims& d, const void* dout, const void* y_send,
                          const int32_t* send_pos, const float* p, void* dy_send, float* dp) {
  cuda::unpermute_combine_bwd(dout, y_send, send_pos, p, d.T, d.K, d.H, d.dtype, dy_send, dp,
                              stream_);
}

void CudaOps::unpermute_sum(const Dims& d, const void* dx_send, const int32_t* send_pos,
                            float* dx_acc) {
  cuda::unpermute_sum(dx_send, send_pos, d.T, d.K, d.H, d.dtype, dx_acc, stream_);
}

}  // namespace moe
