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

}  // namespace moe
