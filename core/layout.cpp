#include "core/layout.h"

#include <vector>

namespace moe {

void expert_major_offsets_strided(const int32_t* counts, int64_t ep, int64_t stride,
                                  int64_t E_local, int64_t align, int64_t* offsets) {
  offsets[0] = 0;
  for (int64_t l = 0; l < E_local; ++l) {
    int64_t rows = 0;
    for (int64_t s = 0; s < ep; ++s) rows += counts[s * stride + l];
    offsets[l + 1] = offsets[l] + (rows + align - 1) / align * align;
  }
}

void expert_major_offsets(const int32_t* counts, int64_t ep, int64_t E_local, int64_t align,
                          int64_t* offsets) {
  expert_major_offsets_strided(counts, ep, E_local, E_local, align, offsets);
}

void block_layout(const int32_t* counts, int64_t ep, int64_t E_local, int64_t align,
                  const int32_t* base, int64_t* offsets, int32_t* starts, int32_t* dest) {
  for (int64_t s = 0; s < ep; ++s) {
    int32_t row = base ? base[s] : 0;
    for (int64_t l = 0; l <= E_local; ++l) {
      starts[s * (E_local + 1) + l] = row;
      if (l < E_local) row += counts[s * E_local + l];
    }
  }
  expert_major_offsets(counts, ep, E_local, align, offsets);
  for (int64_t l = 0; l < E_local; ++l) {
    int64_t at = offsets[l];
    for (int64_t s = 0; s < ep; ++s) {
      dest[s * E_local + l] = int32_t(at);
      at += counts[s * E_local + l];
    }
  }
}

void gathered_counts(const int32_t* counts_all, int64_t ep, int64_t E, int64_t rank, int32_t* recv,
                     int32_t* base) {
  const int64_t El = E / ep, first = rank * El;
  for (int64_t s = 0; s < ep; ++s) {
    const int32_t* c = counts_all + s * E;
    base[s] = 0;
    for (int64_t e = 0; e < first; ++e) base[s] += c[e];
    for (int64_t l = 0; l < El; ++l) recv[s * El + l] = c[first + l];
  }
}

void gathered_layout(const int32_t* counts_all, int64_t ep, int64_t E, int64_t rank, int64_t align,
                     int32_t* recv, int64_t* offsets, int32_t* starts, int32_t* dest) {
  std::vector<int32_t> base(ep);
  gathered_counts(counts_all, ep, E, rank, recv, base.data());
  block_layout(recv, ep, E / ep, align, base.data(), offsets, starts, dest);
}

int64_t expert_block_table_entries(int64_t ep, int64_t E_local) {
  return ep * (E_local + 1) + ep * E_local + E_local;
}

void expert_block_table(const int32_t* counts, int64_t ep, int64_t stride, int64_t first,
                        int64_t E_local, int64_t align, int32_t* table, int64_t* offsets) {
  std::vector<int32_t> recv(ep * E_local), base(ep, 0);
  for (int64_t s = 0; s < ep; ++s) {
    for (int64_t e = 0; e < first; ++e) base[s] += counts[s * stride + e];
    for (int64_t l = 0; l < E_local; ++l) recv[s * E_local + l] = counts[s * stride + first + l];
  }
  int32_t* starts = table;
  int32_t* dest = starts + ep * (E_local + 1);
  int32_t* rows = dest + ep * E_local;
  block_layout(recv.data(), ep, E_local, align, base.data(), offsets, starts, dest);
  for (int64_t l = 0; l < E_local; ++l) {
    rows[l] = 0;
    for (int64_t s = 0; s < ep; ++s) rows[l] += recv[s * E_local + l];
  }
}

int64_t merged_chunk_blocks(int64_t chunks, int64_t ep, int64_t E_local) {
  return chunks * ep * E_local;
}

void merged_chunk_layout(const ChunkRows* chunks, int64_t C, int64_t ep, int64_t E_local,
                         int64_t align, int64_t* offsets, int64_t* blocks) {
  const int64_t n = merged_chunk_blocks(C, ep, E_local);
  int64_t* src = blocks;
  int64_t* dst = blocks + n;
  int64_t* rows = blocks + 2 * n;
  offsets[0] = 0;
  for (int64_t l = 0; l < E_local; ++l) {
    int64_t at = offsets[l];
    for (int64_t s = 0; s < ep; ++s)
      for (int64_t c = 0; c < C; ++c) {
        const ChunkRows& ch = chunks[c];
        int64_t before = 0;  // the chunk's rows of expert l from sources before s
        for (int64_t q = 0; q < s; ++q) before += ch.counts[q * ch.stride + l];
        const int64_t b = (l * ep + s) * C + c;
        src[b] = ch.row_begin + ch.offsets[l] + before;
        dst[b] = at;
        rows[b] = ch.counts[s * ch.stride + l];
        at += rows[b];
      }
    offsets[l + 1] = offsets[l] + (at - offsets[l] + align - 1) / align * align;
  }
}

}  // namespace moe
