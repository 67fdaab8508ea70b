#include <algorithm>
#include <cstdint>

#include "core/digest.h"
#include "core/error.h"
#include "kernels/cuda/digest.h"

namespace moe::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void digest_sum_kernel(const unsigned char* p, uint64_t bytes, bool aligned,
                                  unsigned long long* sum) {
  const uint64_t words = (bytes + 7) / 8;
  uint64_t s = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < words;
       i += uint64_t(gridDim.x) * blockDim.x) {
    const bool whole = aligned && 8 * i + 8 <= bytes;
    s += digest_term(
        i, whole ? reinterpret_cast<const uint64_t*>(p)[i] : digest_word_bytewise(p, bytes, i));
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  __shared__ uint64_t warp_sums[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t b = 0;
    for (int w = 0; w < kThreads / 32; ++w) b += warp_sums[w];
    atomicAdd(sum, static_cast<unsigned long long>(b));  // integer: any order, same sum
  }
}

}  // namespace

void digest_sum(const void* src, size_t bytes, unsigned long long* sum, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(sum, 0, sizeof(*sum), stream));
  if (bytes == 0) return;
  const uint64_t words = (bytes + 7) / 8;
  const int blocks = int(std::min<uint64_t>((words + kThreads - 1) / kThreads, 4096));
  const bool aligned = reinterpret_cast<uintptr_t>(src) % 8 == 0;
  digest_sum_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const unsigned char*>(src), bytes,
                                                     aligned, sum);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace moe::cuda
