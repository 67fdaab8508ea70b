#include "core/router_scratch.h"

#include <algorithm>

#include "core/buffer_plan.h"
#include "core/saturating.h"

namespace moe {
namespace {

constexpr size_t kTerms = kRouterGradTerms;

}  // namespace

int64_t router_stats_chunks(int64_t T) { return (T + kRouterStatsChunk - 1) / kRouterStatsChunk; }

size_t router_loss_stats_scratch_bytes(int64_t T, int64_t E) {
  return size_t(router_stats_chunks(T)) * size_t(2 * E + 1) * sizeof(double);
}

RouterGradsScratch router_grads_scratch(int64_t T, int64_t H, int64_t E) {
  RouterGradsScratch s;
  s.terms = align256(2 * size_t(T) * kTerms * size_t(E));
  s.w_copies = align256(2 * size_t(H) * kTerms * size_t(E));
  s.dw_terms = align256(4 * size_t(H) * kTerms * size_t(E));
  s.total = s.terms + s.w_copies + s.dw_terms;
  return s;
}

size_t router_grads_scratch_bytes(int64_t T, int64_t H, int64_t E, DType dtype) {
  return dtype == DType::kBf16 ? router_grads_scratch(T, H, E).total : 0;
}

size_t dispatch_layout_scratch_bytes(int64_t T, int64_t K, int64_t E) {
  const int64_t ranges = (T * K + kLayoutRangeRows - 1) / kLayoutRangeRows;
  return sizeof(int32_t) * size_t(std::max(E + T * K, ranges * E));
}

int64_t cuda_kernel_scratch_bytes(const Workload& w) {
  const int64_t T = w.tokens_per_rank, H = w.model.hidden, E = w.model.experts;
  // An absurd shape reads as too big rather than overflowing the sizes.
  if (saturating_product({std::max(T, H), 4 * int64_t(kTerms), E}) >= (int64_t(1) << 56))
    return INT64_MAX;
  // CudaOps::scratch allocates at least 16 bytes a slot; each chunk's dispatcher lays out its
  // own tokens.
  const int64_t chunk_T = chunk_workload(w).tokens_per_rank, K = w.model.topk;
  return int64_t(std::max<size_t>(router_loss_stats_scratch_bytes(T, E), 16) +
                 std::max<size_t>(router_grads_scratch_bytes(T, H, E, w.dtype), 16) +
                 std::max<size_t>(dispatch_layout_scratch_bytes(chunk_T, K, E), 16));
}

}  // namespace moe
