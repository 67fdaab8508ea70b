#pragma once
// Layout math every backend and dispatcher shares: where rows sit once they reach their experts.
#include <cstdint>

namespace moe {

// offsets [E_local + 1]: where each local expert's rows start in expert-major order, given
// counts [ep, E_local] (rows source rank s sends local expert l), each expert's block rounded up
// to a multiple of align; offsets[E_local] = rows including the padding.
void expert_major_offsets(const int32_t* counts, int64_t ep, int64_t E_local, int64_t align,
                          int64_t* offsets);

}  // namespace moe
