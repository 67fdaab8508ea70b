#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/shared_sum.h"
#include "kernels/cuda/storage.cuh"

namespace moe::cuda {
namespace {

// Each thread takes N consecutive elements at a time (N = kPack16<T> where the buffers allow
// 16-byte moves, else 1); the per-element arithmetic is the same either way. Acc is the type of
// the sum's destination: T for out, float for dx.
template <class T, class Acc, int N>
__global__ void shared_sum_kernel(const T* rows, int64_t S, int64_t n, Acc* dst) {
  const int64_t packs = n / N;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < packs;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v[N], r[N];
    load_n<N>(dst + i * N, v);
    for (int64_t s = 0; s < S; ++s) {
      load_n<N>(rows + s * n + i * N, r);
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] += r[j];
    }
    store_n<N>(dst + i * N, v);
  }
}

// The sum into storage (out) or, kIntoFp32, into an fp32 buffer (dx's sum).
template <bool kIntoFp32>
void launch(DType dtype, const void* rows, int64_t S, int64_t n, void* dst, cudaStream_t stream) {
  if (n == 0) return;
  with_storage(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    using Acc = std::conditional_t<kIntoFp32, float, T>;
    const T* r = static_cast<const T*>(rows);
    Acc* d = static_cast<Acc*>(dst);
    constexpr int N = kPack16<T>;
    if (n % N == 0 && rows_take_pack16<T>(N, {rows, dst}) && rows_take_pack16<Acc>(N, {dst}))
      shared_sum_kernel<T, Acc, N><<<blocks_for(n / N), kThreads, 0, stream>>>(r, S, n, d);
    else
      shared_sum_kernel<T, Acc, 1><<<blocks_for(n), kThreads, 0, stream>>>(r, S, n, d);
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void shared_sum_out(const void* rows, int64_t S, int64_t n, DType dtype, void* out,
                    cudaStream_t stream) {
  launch<false>(dtype, rows, S, n, out, stream);
}

void shared_sum_dx(const void* rows, int64_t S, int64_t n, DType dtype, float* acc,
                   cudaStream_t stream) {
  launch<true>(dtype, rows, S, n, acc, stream);
}

}  // namespace moe::cuda
