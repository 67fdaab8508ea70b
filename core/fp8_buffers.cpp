#include "core/fp8_buffers.h"

#include <algorithm>
#include <vector>

#include "core/buffer_plan.h"
#include "core/fp8.h"
#include "core/saturating.h"

namespace moe {
namespace {

int64_t blocks_of(int64_t n) { return (n + kFp8Block - 1) / kFp8Block; }

}  // namespace

int64_t cols_fp8_scale_bound(int64_t G, int64_t rows_bound, int64_t K) {
  return K * (rows_bound / kFp8Block + G);
}

int64_t weight_fp8_tiles_ld(int64_t K) { return (blocks_of(K) + 3) / 4 * 4; }

int64_t weight_fp8_scale_stride(int64_t P, int64_t Q) {
  return weight_fp8_tiles_ld(P) * weight_fp8_tiles_ld(Q);
}

int64_t weight_fp8_scales(int64_t G, int64_t P, int64_t Q) {
  return G * std::max(kTensorScaleStride, weight_fp8_scale_stride(P, Q));
}

int64_t fp8_transposed_ld(int64_t rows_bound) { return (rows_bound + 15) / 16 * 16; }

Fp8WeightsLayout fp8_weights_layout(int64_t G, int64_t H, int64_t F) {
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t offset = at;
    at += align256(bytes);
    return offset;
  };
  auto pieces = [&](int64_t P, int64_t Q) {
    Fp8WeightPieces w;
    w.stored = take(size_t(G * P * Q));
    w.transposed = take(size_t(G * P * Q));
    w.stored_scales = take(size_t(weight_fp8_scales(G, P, Q)) * 4);
    w.transposed_scales = take(size_t(weight_fp8_scales(G, P, Q)) * 4);
    return w;
  };
  Fp8WeightsLayout l;
  l.in = pieces(H, 2 * F);
  l.out = pieces(F, H);
  l.bytes = at;
  return l;
}

Fp8ScratchBytes fp8_scratch_bytes(int64_t rows_bound, int64_t E_local, int64_t H, int64_t F) {
  const int64_t widest = std::max(H, 2 * F);
  const int64_t ld = fp8_transposed_ld(rows_bound);
  const int64_t tensor_scales = kTensorScaleStride * E_local;
  auto cols_scales = [&](int64_t K) {
    return size_t(std::max(cols_fp8_scale_bound(E_local, ld, K), tensor_scales)) * 4;
  };
  Fp8ScratchBytes b;
  b.a = size_t(ld * widest);
  b.dy_t = size_t(ld * H);
  b.dh_t = size_t(ld * 2 * F);
  b.a_scales = std::max(size_t(blocks_of(widest) * rows_bound) * 4, cols_scales(widest));
  b.dy_t_scales = cols_scales(H);
  b.dh_t_scales = cols_scales(2 * F);
  b.xe_t = {size_t(ld * H), cols_scales(H)};
  b.a_t = {size_t(ld * F), cols_scales(F)};
  return b;
}

int64_t cuda_fp8_step_bytes(const Workload& w, int64_t rows) {
  if (w.precision == Precision::kBf16) return 0;
  const int64_t H = w.model.hidden, F = w.model.ffn, T = w.tokens_per_rank;
  const int64_t E_local = w.model.experts / std::max<int64_t>(w.mesh.ep, 1);
  const int64_t S = w.model.shared_experts, Fs = w.model.shared_ffn_used();
  const int64_t chunks = step_chunks(w);
  // An absurd shape reads as too big rather than overflowing the sizes below.
  constexpr int64_t kSane = int64_t(1) << 56;
  for (int64_t elems : {saturating_product({std::max<int64_t>(E_local, S), 3, H, std::max(F, Fs)}),
                        saturating_product({std::max(rows, T), 2, H, 2, std::max(F, Fs)})})
    if (elems >= kSane) return INT64_MAX;
  const Fp8ScratchBytes routed = fp8_scratch_bytes(rows, E_local, H, F);
  auto scratch = [](const Fp8ScratchBytes& b) {
    return std::vector<size_t>{b.a, b.dy_t, b.dh_t, b.a_scales, b.dy_t_scales, b.dh_t_scales};
  };
  std::vector<size_t> slots = scratch(routed);
  size_t bytes = fp8_weights_bytes(E_local, H, F);
  if (chunks == 1)
    bytes +=
        routed.a_t.total() + (w.dispatch_dtype == DispatchDtype::kBf16 ? routed.xe_t.total() : 0);
  if (S > 0) {
    // The shared experts (core/shared_experts.cpp) run the same path one at a time, each on the
    // rank's T tokens as one group, each keeping its own a's codes.
    const Fp8ScratchBytes shared = fp8_scratch_bytes(T, 1, H, Fs);
    const std::vector<size_t> theirs = scratch(shared);
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = std::max(slots[i], theirs[i]);
    bytes += fp8_weights_bytes(S, H, Fs) + size_t(S) * shared.a_t.total() + shared.xe_t.total();
  }
  for (size_t s : slots) bytes += std::max<size_t>(s, 16);
  return int64_t(bytes);
}

}  // namespace moe
