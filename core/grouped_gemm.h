#pragma once
// The three shapes of the expert GEMMs over expert-major rows, shared by the CPU twin
// (moe::cpu::grouped_gemm) and the CUDA grouped kernel (moe::cuda::grouped_gemm). Group g owns
// rows [offsets[g], offsets[g+1]) of the row operands; weights and weight gradients are dense
// per group. All row-major.
#include <array>
#include <cmath>
#include <cstdint>

namespace moe {

// The six expert GEMMs of a step, each over every local expert, in the order a step runs them:
// the forward's up and down projections, the data gradients through w_out and w_in, and the
// weight gradients of w_out and w_in. A backend may run each by a different method.
enum class ExpertGemm { kUp, kDown, kDgradA, kDgradX, kWgradOut, kWgradIn };
constexpr int kNumExpertGemms = 6;
// Their names in logs, results and `moebench gemm`'s table.
constexpr std::array<const char*, kNumExpertGemms> kExpertGemmNames = {
    "up", "down", "dgrad_a", "dgrad_x", "wgrad_out", "wgrad_in"};
constexpr const char* expert_gemm_name(ExpertGemm g) { return kExpertGemmNames[size_t(g)]; }

enum class GroupedLayout {
  // C [rows, N] = A [rows, K] @ B[g] with B stored [G, K, N]: the forward up and down
  // projections (x @ w_in, a @ w_out). M is the group's row count; the M argument is unused.
  kRowsTimesWeight,
  // C [rows, N] = A [rows, K] @ B[g]^T with B stored [G, N, K]: the data gradients
  // (dy @ w_out^T, dh @ w_in^T).
  kRowsTimesWeightT,
  // C[g] [M, N] = A [rows_g, M]^T @ B [rows_g, N], C stored [G, M, N]: the weight gradients
  // (a^T dy, x^T dh); K is the group's row count (the K argument is unused) and a group with
  // no rows gets zeros.
  kRowsTTimesRows,
};

// Rows of C per tile in the CUDA grouped kernel's row GEMMs (gemm.method grouped_sm90): a group's
// last tile multiplies rows past the group's end, which it does not store.
constexpr int kGroupedTileRows = 128;

// The rows the grouped kernel's row GEMMs multiply for a routing against the rows routed, summed
// over the steps added: each expert's rows at its rank (its world count over the FSDP groups, each
// of which routes its own tokens) rounded up to whole tiles. Known only where routing is dropless:
// a capacity's drops are still in the router's counts.
class GroupedTileRows {
 public:
  GroupedTileRows(bool dropless, int64_t fsdp, int tile = kGroupedTileRows)
      : counted_(dropless), fsdp_(double(fsdp)), tile_(tile) {}
  void add(const float* world_counts, int64_t experts) {
    if (!counted_) return;
    for (int64_t e = 0; e < experts; ++e) {
      const double rows = double(world_counts[e]) / fsdp_;
      routed_ += rows;
      tiled_ += std::ceil(rows / tile_) * tile_;
    }
  }
  // Rows multiplied over rows routed; 0 where unknown or nothing was routed.
  double over_rows() const { return routed_ > 0 ? tiled_ / routed_ : 0; }

 private:
  bool counted_;
  double fsdp_;
  int tile_;
  double routed_ = 0, tiled_ = 0;
};

}  // namespace moe
