#include <cstdint>

#include "core/error.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/storage.cuh"

namespace moe::cuda {
namespace {

template <class T>
__global__ void storage_to_f32_kernel(const T* src, int64_t n, float* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = load_f(src + i);
}

template <class T>
__global__ void f32_to_storage_kernel(const float* src, int64_t n, T* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    store_f(dst + i, src[i]);
}

template <class T>
__global__ void fill_seeded_kernel(InitRule rule, int64_t begin, int64_t n, T* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    store_f(dst + i, rule.value(uint64_t(begin + i)));
}

// Operands of the calibration GEMM: a fixed pattern in [-0.5, 0.5), never zero-filled, so that
// the tensor cores toggle (and draw power) as they do on real data.
template <class S>
__global__ void calibration_fill_kernel(S* dst, int64_t n, uint32_t salt) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = (uint32_t(i) ^ salt) * 2654435761u;
    h ^= h >> 16;
    store_f(dst + i, float(h & 0xffff) / 65536.0f - 0.5f);
  }
}

// Bit 3 (the exponent field's lowest) cleared: the field stays below 15, where e4m3's NaN lies.
__global__ void fp8_calibration_fill_kernel(uint8_t* dst, int64_t n, uint32_t salt) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = (uint32_t(i) ^ salt) * 2654435761u;
    h ^= h >> 16;
    dst[i] = uint8_t(h & 0xf7u);
  }
}

}  // namespace

void storage_to_f32(const void* src, int64_t n, DType dtype, float* dst, cudaStream_t stream) {
  if (n == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    storage_to_f32_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const S*>(src), n,
                                                                  dst);
  });
  CUDA_CHECK(cudaGetLastError());
}

void f32_to_storage(const float* src, int64_t n, DType dtype, void* dst, cudaStream_t stream) {
  if (n == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    f32_to_storage_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, n, static_cast<S*>(dst));
  });
  CUDA_CHECK(cudaGetLastError());
}

void fill_seeded(const InitRule& rule, int64_t begin, int64_t n, DType dtype, void* dst,
                 cudaStream_t stream) {
  if (n == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    fill_seeded_kernel<<<blocks_for(n), kThreads, 0, stream>>>(rule, begin, n,
                                                               static_cast<S*>(dst));
  });
  CUDA_CHECK(cudaGetLastError());
}

void fill_calibration_pattern(void* dst, int64_t n, uint32_t salt, DType dtype,
                              cudaStream_t stream) {
  with_storage(dtype, [&](auto* tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    calibration_fill_kernel<<<1024, 256, 0, stream>>>(static_cast<S*>(dst), n, salt);
  });
  CUDA_CHECK(cudaGetLastError());
}

void fill_fp8_calibration_pattern(uint8_t* dst, int64_t n, uint32_t salt, cudaStream_t stream) {
  fp8_calibration_fill_kernel<<<1024, 256, 0, stream>>>(dst, n, salt);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace moe::cuda
