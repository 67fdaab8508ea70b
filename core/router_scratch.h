#pragma once
// The sizes of the CUDA router and layout kernels' reusable scratch, which the step allocates
// beside its planned buffers (CudaOps::scratch): the loss statistics' per-chunk partial sums, the
// backward GEMMs' split terms and the dispatch layout's counts. kernels/cuda sizes and lays them
// out by these, and the memory estimate counts them for the CUDA backend, on any build.
#include <cstddef>
#include <cstdint>

#include "core/workload.h"

namespace moe {

// Tokens per block in the loss statistics' first pass: each token costs the block three
// dependent reductions, so short chunks keep more blocks in flight. On DeepSeek-V3 at 4096 tokens
// (H100) 8 took the first pass from 73 to 22 us (results/2026-11-27-small-kernels, call 7); the
// second pass sums the 512 chunks in 5 us (results/2026-11-27-wgrad-bounds, call 1).
constexpr int64_t kRouterStatsChunk = 8;
int64_t router_stats_chunks(int64_t T);
// The statistics' partial sums: 2E + 1 doubles per chunk.
size_t router_loss_stats_scratch_bytes(int64_t T, int64_t E);

// router_grads' scratch (bf16 storage), each part 256-byte aligned: the split dlogits [T, 3E] and
// w_gate's copies [H, 3E] (bf16), the three blocks of dw_gate [H, 3E] (fp32); three terms a
// value (kernels/cuda/router_grads.h says why).
constexpr int kRouterGradTerms = 3;
struct RouterGradsScratch {
  size_t terms = 0, w_copies = 0, dw_terms = 0, total = 0;
};
RouterGradsScratch router_grads_scratch(int64_t T, int64_t H, int64_t E);
// Its bytes for storage dtype (0 for fp32 storage, which needs no split).
size_t router_grads_scratch_bytes(int64_t T, int64_t H, int64_t E, DType dtype);

// The dispatch layout's (kernels/cuda/layout.h) for T tokens of K rows over E experts: dropping
// by probability, each expert's rows before drops and the rows gathered by expert (E + T K
// int32); else each kLayoutRangeRows rows' count per expert.
constexpr int64_t kLayoutRangeRows = 256;
size_t dispatch_layout_scratch_bytes(int64_t T, int64_t K, int64_t E);

// All three, as a CUDA step holds them (w resolved; the layout's for a chunk's tokens).
int64_t cuda_kernel_scratch_bytes(const Workload& w);

}  // namespace moe
