#include "core/layout.h"

namespace moe {

void expert_major_offsets(const int32_t* counts, int64_t ep, int64_t E_local, int64_t align,
                          int64_t* offsets) {
  offsets[0] = 0;
  for (int64_t l = 0; l < E_local; ++l) {
    int64_t rows = 0;
    for (int64_t s = 0; s < ep; ++s) rows += counts[s * E_local + l];
    offsets[l + 1] = offsets[l] + (rows + align - 1) / align * align;
  }
}

void gathered_layout(const int32_t* counts_all, int64_t ep, int64_t E, int64_t rank, int64_t align,
                     int32_t* recv, int64_t* offsets, int32_t* starts, int32_t* dest) {
  const int64_t El = E / ep, first = rank * El;
  for (int64_t s = 0; s < ep; ++s) {
    const int32_t* c = counts_all + s * E;
    int32_t row = 0;
    for (int64_t e = 0; e < first; ++e) row += c[e];
    for (int64_t l = 0; l <= El; ++l) {
      starts[s * (El + 1) + l] = row;
      if (l < El) {
        recv[s * El + l] = c[first + l];
        row += c[first + l];
      }
    }
  }
  expert_major_offsets(recv, ep, El, align, offsets);
  for (int64_t l = 0; l < El; ++l) {
    int64_t at = offsets[l];
    for (int64_t s = 0; s < ep; ++s) {
      dest[s * El + l] = int32_t(at);
      at += recv[s * El + l];
    }
  }
}

}  // namespace moe
