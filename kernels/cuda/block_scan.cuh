#pragma once
// A block-wide exclusive prefix sum over more values than the block has threads, in tiles with a
// running carry: the layout kernels' offsets, which a single thread once summed in turn (tens of
// microseconds of dependent loads for a few hundred experts). Internal to kernels/cuda.
#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/launch.cuh"

namespace moe::cuda {

// Calls out(i, prefix) for every i in [0, n), prefix = value(0) + ... + value(i - 1), in int64.
// Every thread of the block (kThreads of them) must call it; value(i) is called once per i.
template <class Value, class Out>
__device__ void block_exclusive_scan(int64_t n, Value value, Out out) {
  using Scan = cub::BlockScan<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int64_t carry;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int64_t start = 0; start < n; start += kThreads) {
    const int64_t i = start + threadIdx.x;
    const int64_t v = i < n ? value(i) : 0;
    int64_t before = 0, total = 0;
    Scan(tmp).ExclusiveSum(v, before, total);
    if (i < n) out(i, carry + before);
    __syncthreads();  // every thread has read carry (and tmp is free)
    if (threadIdx.x == 0) carry += total;
    __syncthreads();
  }
}

}  // namespace moe::cuda
