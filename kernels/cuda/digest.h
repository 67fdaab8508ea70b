#pragma once
// core/digest.h's digest on the device: the sum of the word terms, reduced in integers, so the
// order in which blocks add up cannot change it.
#include <cuda_runtime.h>

#include <cstddef>

namespace moe::cuda {

// *sum = the sum of digest_term over the words of [src, src + bytes) (device memory); the caller
// finishes it with digest_finish. Asynchronous on `stream`.
void digest_sum(const void* src, size_t bytes, unsigned long long* sum, cudaStream_t stream);

}  // namespace moe::cuda
