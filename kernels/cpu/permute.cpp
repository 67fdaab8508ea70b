#include "kernels/cpu/permute.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/layout.h"

namespace moe::cpu {

void permute_rows(const float* src, const int32_t* send_pos, int64_t T, int64_t K, int64_t H,
                  float* dst) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      if (send_pos[t * K + k] >= 0)  // -1: dropped by the capacity
        std::memcpy(dst + int64_t(send_pos[t * K + k]) * H, src + t * H, sizeof(float) * H);
}

void regroup_rows(const float* src, const int32_t* counts, int64_t ep, int64_t E_local, int64_t H,
                  int64_t align, bool to_expert_major, float* dst) {
  // Block (s, l) starts at rank_offset in source-rank-major order and expert_offset in
  // expert-major order; both are prefix sums over the same count matrix.
  std::vector<int64_t> starts(E_local + 1), expert_offset(ep * E_local);
  expert_major_offsets(counts, ep, E_local, align, starts.data());
  for (int64_t l = 0; l < E_local; ++l) {
    int64_t off = starts[l];
    for (int64_t s = 0; s < ep; ++s) {
      expert_offset[s * E_local + l] = off;
      off += counts[s * E_local + l];
    }
    // The padding must be zeros: the GEMMs run over it and the weight gradients sum over it.
    if (to_expert_major) std::fill(dst + off * H, dst + starts[l + 1] * H, 0.0f);
  }
  int64_t rank_offset = 0;
  for (int64_t b = 0; b < ep * E_local; ++b) {
    const int64_t rows = counts[b];
    if (rows == 0) continue;
    const int64_t from = to_expert_major ? rank_offset : expert_offset[b];
    const int64_t to = to_expert_major ? expert_offset[b] : rank_offset;
    std::memcpy(dst + to * H, src + from * H, sizeof(float) * rows * H);
    rank_offset += rows;
  }
}

void zero_expert_padding(const int32_t* rows, const int64_t* offsets, int64_t E_local, int64_t H,
                         float* expert_major) {
  for (int64_t l = 0; l < E_local; ++l)
    for (int64_t r = offsets[l] + rows[l]; r < offsets[l + 1]; ++r)
      std::fill(expert_major + r * H, expert_major + (r + 1) * H, 0.0f);
}

void gather_chunk_rows(const int64_t* offsets, const int64_t* blocks, int64_t C, int64_t ep,
                       int64_t E_local, const void* src, size_t row_bytes, void* dst) {
  const int64_t n = merged_chunk_blocks(C, ep, E_local);
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  for (int64_t l = 0; l < E_local; ++l) {
    int64_t end = offsets[l];
    for (int64_t b = l * ep * C; b < (l + 1) * ep * C; ++b) {
      std::memcpy(to + size_t(blocks[n + b]) * row_bytes, from + size_t(blocks[b]) * row_bytes,
                  size_t(blocks[2 * n + b]) * row_bytes);
      end = blocks[n + b] + blocks[2 * n + b];
    }
    std::memset(to + size_t(end) * row_bytes, 0, size_t(offsets[l + 1] - end) * row_bytes);
  }
}

void rows_to_ranks(const void* src, size_t row_bytes, const int32_t* wire_pos, int64_t T,
                   int64_t ep, int64_t first_row, void* const* to) {
  const char* from = static_cast<const char*>(src);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t r = 0; r < ep; ++r)
      if (wire_pos[t * ep + r] >= 0)
        std::memcpy(static_cast<char*>(to[r]) + size_t(first_row + t) * row_bytes,
                    from + size_t(t) * row_bytes, row_bytes);
}

void rows_to_sources(const void* src, size_t row_bytes, const int32_t* wire_pos_all, int64_t T,
                     int64_t ep, int64_t me, void* const* to) {
  const char* from = static_cast<const char*>(src);
  for (int64_t g = 0; g < ep * T; ++g) {
    const int32_t row = wire_pos_all[g * ep + me];
    if (row >= 0)
      std::memcpy(static_cast<char*>(to[g / T]) + size_t(row) * row_bytes,
                  from + size_t(g) * row_bytes, row_bytes);
  }
}

}  // namespace moe::cpu
