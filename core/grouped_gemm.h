#pragma once
// The three shapes of the expert GEMMs over expert-major rows, shared by the CPU twin
// (moe::cpu::grouped_gemm) and the CUDA grouped kernel (moe::cuda::grouped_gemm). Group g owns
// rows [offsets[g], offsets[g+1]) of the row operands; weights and weight gradients are dense
// per group. All row-major.
#include <cstdint>

namespace moe {

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

}  // namespace moe
