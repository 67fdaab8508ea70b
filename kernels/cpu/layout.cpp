#include "kernels/cpu/layout.h"

#include <vector>

namespace moe::cpu {

void dispatch_layout(const int32_t* idx, int64_t T, int64_t K, int64_t E, int32_t* expert_counts,
                     int32_t* send_pos) {
  for (int64_t e = 0; e < E; ++e) expert_counts[e] = 0;
  for (int64_t i = 0; i < T * K; ++i) ++expert_counts[idx[i]];
  std::vector<int32_t> next(E);  // next free row of each expert's block
  int32_t offset = 0;
  for (int64_t e = 0; e < E; ++e) {
    next[e] = offset;
    offset += expert_counts[e];
  }
  for (int64_t i = 0; i < T * K; ++i) send_pos[i] = next[idx[i]]++;
}

}  // namespace moe::cpu
