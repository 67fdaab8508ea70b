// The CPU GEMM: plain C++ that GCC/Clang vectorise at -O3 (no intrinsics, no threads).
//
// op(B) is first packed into column panels of kNr columns, each stored k-major ([K][kNr],
// contiguous, zero-padded past N), whatever B's layout. A 4 x kNr tile of C is then accumulated
// in a small local array the compiler keeps in vector registers, one rank-1 update per k. So
// every trans combination runs the same inner loop and sums over k in the same order: the result
// does not depend on how the operands are stored. Rows are taken in blocks of kMc so that a block
// of A stays in cache while all the panels stream past it.
#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"

namespace moe::cpu {

float store_as(DType dtype, float v) { return dtype == DType::kBf16 ? round_to_bf16(v) : v; }

namespace {

// Micro tile kMr x kNr: 4 x 16 was the fastest of the shapes tried (3..8 x 8..32), both for the
// default SSE2 code and with -march=x86-64-v3.
constexpr int64_t kNr = 16;  // columns per B panel and micro tile
constexpr int64_t kMr = 4;   // rows per micro tile
constexpr int64_t kMc = 64;  // rows per cache block of A

// Packs op(B)[:, j0:j0+kNr] as [K][kNr], zero columns past N.
void pack_panel(const float* B, bool trans_b, int64_t N, int64_t K, int64_t j0, float* panel) {
  int64_t nr = std::min(kNr, N - j0);
  if (!trans_b) {
    for (int64_t k = 0; k < K; k++) {
      const float* src = B + k * N + j0;
      float* dst = panel + k * kNr;
      for (int64_t j = 0; j < nr; j++) dst[j] = src[j];
      for (int64_t j = nr; j < kNr; j++) dst[j] = 0.0f;
    }
  } else {
    // B stored [N, K]: read each of the panel's rows of B contiguously, scatter into the panel.
    for (int64_t j = 0; j < kNr; j++) {
      if (j < nr) {
        const float* src = B + (j0 + j) * K;
        for (int64_t k = 0; k < K; k++) panel[k * kNr + j] = src[k];
      } else {
        for (int64_t k = 0; k < K; k++) panel[k * kNr + j] = 0.0f;
      }
    }
  }
}

// Packs rows [i0, i0 + rows) of op(A) as micro panels [rows / kMr][K][kMr] (rows is a multiple
// of kMr; zero rows past M), so that the micro tile reads kMr contiguous values per k.
void pack_a_block(const float* A, bool trans_a, int64_t M, int64_t K, int64_t i0, int64_t rows,
                  float* block) {
  for (int64_t t = 0; t < rows; t++) {
    int64_t i = i0 + t;
    float* dst = block + (t / kMr) * K * kMr + t % kMr;
    if (i >= M) {
      for (int64_t k = 0; k < K; k++) dst[k * kMr] = 0.0f;
    } else if (!trans_a) {
      const float* src = A + i * K;
      for (int64_t k = 0; k < K; k++) dst[k * kMr] = src[k];
    }
  }
  if (trans_a) {
    // A stored [K, M]: walk it by rows (contiguous in i) rather than by strided columns.
    for (int64_t k = 0; k < K; k++) {
      const float* src = A + k * M + i0;
      for (int64_t t = 0; t < rows && i0 + t < M; t++) {
        block[(t / kMr) * K * kMr + k * kMr + t % kMr] = src[t];
      }
    }
  }
}

// tile [kMr][kNr] = a_panel @ b_panel in fp32, summed over k in order. The accumulators are
// fixed-size local arrays, indexed only with constants after unrolling, so that the compiler keeps
// them in registers and vectorises over the kNr columns; storing them with runtime bounds (the
// edge tiles) would force them into memory, so the caller handles edges, accumulate and rounding.
void micro_tile(int64_t K, const float* a_panel, const float* b_panel, float* tile) {
  float acc0[kNr] = {}, acc1[kNr] = {}, acc2[kNr] = {}, acc3[kNr] = {};
  for (int64_t k = 0; k < K; k++) {
    const float* a = a_panel + k * kMr;
    const float* b = b_panel + k * kNr;
    float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    for (int j = 0; j < kNr; j++) {
      acc0[j] += a0 * b[j];
      acc1[j] += a1 * b[j];
      acc2[j] += a2 * b[j];
      acc3[j] += a3 * b[j];
    }
  }
  for (int j = 0; j < kNr; j++) {
    tile[0 * kNr + j] = acc0[j];
    tile[1 * kNr + j] = acc1[j];
    tile[2 * kNr + j] = acc2[j];
    tile[3 * kNr + j] = acc3[j];
  }
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A,
          const float* B, float* C, bool accumulate, DType out_dtype) {
  MOE_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm sizes M=" << M << " N=" << N << " K=" << K);
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate) std::memset(C, 0, sizeof(float) * M * N);
    return;
  }

  // All panels of op(B), packed once: n_panels * K * kNr floats, reused across calls.
  int64_t n_panels = (N + kNr - 1) / kNr;
  thread_local std::vector<float> packed;  // grows to the largest B seen; reused by later calls
  packed.resize(n_panels * K * kNr);
  for (int64_t p = 0; p < n_panels; p++) {
    pack_panel(B, trans_b, N, K, p * kNr, packed.data() + p * K * kNr);
  }

  thread_local std::vector<float> a_block;
  a_block.resize(kMc * K);
  for (int64_t ib = 0; ib < M; ib += kMc) {
    int64_t rows = std::min(kMc, M - ib);
    int64_t rows_padded = (rows + kMr - 1) / kMr * kMr;
    pack_a_block(A, trans_a, M, K, ib, rows_padded, a_block.data());
    for (int64_t p = 0; p < n_panels; p++) {
      const float* b_panel = packed.data() + p * K * kNr;
      int64_t j0 = p * kNr;
      int64_t nr = std::min(kNr, N - j0);
      for (int64_t t = 0; t < rows; t += kMr) {
        int64_t mr = std::min(kMr, rows - t);
        float tile[kMr * kNr];
        micro_tile(K, a_block.data() + t * K, b_panel, tile);
        for (int64_t r = 0; r < mr; r++) {
          float* c = C + (ib + t + r) * N + j0;
          for (int64_t j = 0; j < nr; j++) {
            c[j] = store_as(out_dtype, accumulate ? c[j] + tile[r * kNr + j] : tile[r * kNr + j]);
          }
        }
      }
    }
  }
}

namespace {

// Where group g's operands and output start in grouped_gemm's arrays, and how many values its
// A and B hold (core/grouped_gemm.h's layouts).
struct GroupOperands {
  int64_t a, b, c, a_size, b_size;
};

GroupOperands group_operands(GroupedLayout layout, int64_t g, int64_t r0, int64_t rows, int64_t M,
                             int64_t N, int64_t K) {
  if (layout == GroupedLayout::kRowsTTimesRows)
    return {r0 * M, r0 * N, g * M * N, rows * M, rows * N};
  return {r0 * K, g * K * N, r0 * N, rows * K, K * N};
}

// One group's product from its operands.
void gemm_of_group(GroupedLayout layout, int64_t rows, int64_t M, int64_t N, int64_t K,
                   const float* A, const float* B, float* C, DType out_dtype, bool accumulate) {
  switch (layout) {
    case GroupedLayout::kRowsTimesWeight:
      if (rows > 0) gemm(false, false, rows, N, K, A, B, C, false, out_dtype);
      break;
    case GroupedLayout::kRowsTimesWeightT:
      if (rows > 0) gemm(false, true, rows, N, K, A, B, C, false, out_dtype);
      break;
    case GroupedLayout::kRowsTTimesRows:
      gemm(true, false, M, N, rows, A, B, C, accumulate, out_dtype);
      break;
  }
}

}  // namespace

void grouped_gemm(GroupedLayout layout, int64_t G, const int64_t* offsets, int64_t M, int64_t N,
                  int64_t K, const float* A, const float* B, float* C, DType out_dtype,
                  bool accumulate) {
  for (int64_t g = 0; g < G; ++g) {
    const int64_t r0 = offsets[g], rows = offsets[g + 1] - r0;
    const GroupOperands at = group_operands(layout, g, r0, rows, M, N, K);
    gemm_of_group(layout, rows, M, N, K, A + at.a, B + at.b, C + at.c, out_dtype, accumulate);
  }
}

void grouped_gemm_fp8(GroupedLayout layout, int64_t G, const int64_t* offsets, int64_t M, int64_t N,
                      int64_t K, const float* A, const float* B, float* C, DType out_dtype,
                      Fp8Recipe recipe, bool accumulate, bool a_quantized) {
  std::vector<float> a, b;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t r0 = offsets[g], rows = offsets[g + 1] - r0;
    const GroupOperands at = group_operands(layout, g, r0, rows, M, N, K);
    a.assign(A + at.a, A + at.a + at.a_size);
    b.assign(B + at.b, B + at.b + at.b_size);
    fp8_quantize_group_operands(layout, rows, M, N, K, a_quantized ? nullptr : a.data(), b.data(),
                                recipe);
    gemm_of_group(layout, rows, M, N, K, a.data(), b.data(), C + at.c, out_dtype, accumulate);
  }
}

}  // namespace moe::cpu
