#include "kernels/cpu/layout.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace moe::cpu {

void dispatch_layout(const int32_t* idx, const float* p, int64_t T, int64_t K, int64_t E,
                     int64_t capacity, bool drop_by_position, int32_t* expert_counts,
                     int32_t* send_pos) {
  const int64_t n = T * K;
  const bool drops = capacity > 0;
  MOE_CHECK(!drops || drop_by_position || p || n == 0,
            "dispatch_layout: dropping by probability needs p");
  // Each expert's rows in t*K + k order (a counting sort), then, when dropping by probability,
  // reordered by descending p: the stable sort keeps t*K + k order among equal p.
  std::vector<int64_t> begin(E + 1, 0), order(n);
  for (int64_t i = 0; i < n; ++i) ++begin[idx[i] + 1];
  for (int64_t e = 0; e < E; ++e) begin[e + 1] += begin[e];
  std::vector<int64_t> fill(begin.begin(), begin.end() - 1);
  for (int64_t i = 0; i < n; ++i) order[fill[idx[i]]++] = i;
  std::vector<uint8_t> keep(n, 1);
  for (int64_t e = 0; e < E; ++e) {
    if (!drops || begin[e + 1] - begin[e] <= capacity) continue;
    auto first = order.begin() + begin[e], last = order.begin() + begin[e + 1];
    if (!drop_by_position)
      std::stable_sort(first, last, [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    for (auto it = first + capacity; it != last; ++it) keep[*it] = 0;
  }

  for (int64_t e = 0; e < E; ++e) expert_counts[e] = 0;
  for (int64_t i = 0; i < n; ++i) expert_counts[idx[i]] += keep[i];
  std::vector<int32_t> next(E);  // next free row of each expert's block
  int32_t offset = 0;
  for (int64_t e = 0; e < E; ++e) {
    next[e] = offset;
    offset += expert_counts[e];
  }
  for (int64_t i = 0; i < n; ++i) send_pos[i] = keep[i] ? next[idx[i]]++ : -1;
}

void experts_to_slots(const int32_t* idx, int64_t n, const int32_t* slot_of, int32_t* slots) {
  for (int64_t i = 0; i < n; ++i) slots[i] = slot_of[idx[i]];
}

void expert_major_positions(const int32_t* send_pos, const int32_t* starts, const int32_t* dest,
                            int64_t sources, int64_t rows_per_source, int64_t E_local,
                            int32_t* pos) {
  for (int64_t s = 0; s < sources; ++s) {
    const int32_t* first = starts + s * (E_local + 1);
    for (int64_t i = s * rows_per_source; i < (s + 1) * rows_per_source; ++i) {
      const int32_t row = send_pos[i];
      // A dropped row (-1) falls below first[0] >= 0 too.
      if (row < first[0] || row >= first[E_local]) {
        pos[i] = -1;
        continue;
      }
      // The last expert starting at or before the row: empty experts' blocks start where the
      // next one does, so they are skipped.
      const int64_t l = std::upper_bound(first, first + E_local + 1, row) - first - 1;
      pos[i] = dest[s * E_local + l] + (row - first[l]);
    }
  }
}

void dedup_layout(const int32_t* idx, const float* p, const int32_t* expert_counts,
                  const int32_t* send_pos, int64_t T, int64_t K, int64_t E, int64_t ep,
                  int32_t* wire_pos, int32_t* wire_counts, int32_t* slots, float* weights) {
  const int64_t El = E / ep;
  auto takes = [&](int64_t t, int64_t k, int64_t r) {
    return send_pos[t * K + k] >= 0 && idx[t * K + k] / El == r;
  };
  int32_t wire = 0, rank_begin = 0;  // wire rows and send positions of the ranks before r
  for (int64_t r = 0; r < ep; ++r) {
    const int32_t first = wire;
    for (int64_t t = 0; t < T; ++t) {
      bool any = false;
      for (int64_t k = 0; k < K; ++k) any = any || takes(t, k, r);
      wire_pos[t * ep + r] = any ? wire : -1;
      if (!any) continue;
      for (int64_t k = 0; k < K; ++k) {
        const bool mine = takes(t, k, r);
        slots[int64_t(wire) * K + k] = mine ? send_pos[t * K + k] - rank_begin : -1;
        weights[int64_t(wire) * K + k] = mine ? p[t * K + k] : 0.0f;
      }
      ++wire;
    }
    wire_counts[r] = wire - first;
    for (int64_t e = r * El; e < (r + 1) * El; ++e) rank_begin += expert_counts[e];
  }
}

}  // namespace moe::cpu
