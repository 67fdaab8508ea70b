#pragma once
// An EP group simulated in one process, for the dispatchers' tests: each source rank's routing,
// tokens and layout (dispatch_layout, capacity drops included), and what the all-to-all path
// (permute, the exchange of send-order blocks, regroup) gives each rank's experts, which every
// other dispatcher must reproduce row for row.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/layout.h"
#include "kernels/cpu/layout.h"
#include "kernels/cpu/permute.h"

namespace moe::test {

struct GroupCase {
  std::string name;
  int64_t ep, El, T, K, H, align, capacity;
  bool by_position;
  int64_t silent_rank;  // whose experts no token picks (-1: none)
};

// The groups every dispatcher's test runs: a rank no token picks, drops by both policies with
// align padding, one expert a rank, and ep 1 with padding or drops.
inline std::vector<GroupCase> group_cases() {
  return {
      {"ep 3, rank 2 receives nothing", 3, 2, 9, 2, 12, 1, 0, false, 2},
      {"ep 4, capacity by probability, align 8", 4, 3, 20, 4, 8, 8, 3, false, -1},
      {"ep 2, capacity by position, align 4", 2, 4, 16, 3, 5, 4, 2, true, -1},
      {"ep 8, one expert a rank", 8, 1, 6, 2, 4, 1, 0, false, -1},
      {"ep 1, align 16", 1, 6, 13, 3, 7, 16, 0, false, -1},
      {"ep 1, capacity", 1, 4, 10, 2, 3, 1, 3, false, -1},
  };
}

// One source rank's tokens and its layout. x holds exact floats that name their source, token
// and column, so that a row in the wrong place shows.
struct Source {
  std::vector<int32_t> idx, counts, send_pos;
  std::vector<float> p, x, dout;
};

inline std::vector<Source> make_sources(const GroupCase& c, uint64_t seed) {
  const int64_t E = c.ep * c.El;
  std::mt19937_64 rng(seed);
  std::vector<int32_t> pool;
  for (int32_t e = 0; e < E; ++e)
    if (e / c.El != c.silent_rank) pool.push_back(e);
  std::uniform_int_distribution<int> level(1, 4);  // p with ties, for the drop order
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<Source> src(c.ep);
  for (int64_t s = 0; s < c.ep; ++s) {
    Source& r = src[s];
    for (int64_t t = 0; t < c.T; ++t) {
      std::shuffle(pool.begin(), pool.end(), rng);
      r.idx.insert(r.idx.end(), pool.begin(), pool.begin() + c.K);
      for (int64_t k = 0; k < c.K; ++k) r.p.push_back(0.25f * float(level(rng)));
      for (int64_t h = 0; h < c.H; ++h) {
        r.x.push_back(float(s * 4096 + t) + float(h) / 64.0f);
        r.dout.push_back(unit(rng));
      }
    }
    r.counts.resize(E);
    r.send_pos.resize(c.T * c.K);
    cpu::dispatch_layout(r.idx.data(), r.p.data(), c.T, c.K, E, c.capacity, c.by_position,
                         r.counts.data(), r.send_pos.data());
  }
  return src;
}

// Rows [T*K, H] of each source in its send order (`rows` of source s: [T, H] per token), as
// permute_rows writes them; dropped rows are not sent.
inline std::vector<std::vector<float>> send_order(const GroupCase& c,
                                                  const std::vector<Source>& src,
                                                  const std::vector<float> Source::*rows) {
  std::vector<std::vector<float>> out;
  for (const Source& r : src) {
    out.emplace_back(c.T * c.K * c.H);
    cpu::permute_rows((r.*rows).data(), r.send_pos.data(), c.T, c.K, c.H, out.back().data());
  }
  return out;
}

// Rank d's expert-major rows as the all-to-all dispatcher builds them from each source's
// send-order rows: each source's block for d's experts, then the regroup (padding zeros).
inline std::vector<float> alltoall_expert_major(const GroupCase& c, const std::vector<Source>& src,
                                                const std::vector<std::vector<float>>& send,
                                                int64_t d) {
  std::vector<int32_t> counts(c.ep * c.El);
  std::vector<float> recv;
  for (int64_t s = 0; s < c.ep; ++s) {
    const auto first = src[s].counts.begin() + d * c.El;
    const int64_t begin = std::accumulate(src[s].counts.begin(), first, int64_t(0));
    const int64_t n = std::accumulate(first, first + c.El, int64_t(0));
    recv.insert(recv.end(), send[s].begin() + begin * c.H, send[s].begin() + (begin + n) * c.H);
    std::copy(first, first + c.El, counts.begin() + s * c.El);
  }
  std::vector<int64_t> offsets(c.El + 1);
  expert_major_offsets(counts.data(), c.ep, c.El, c.align, offsets.data());
  std::vector<float> xe(offsets[c.El] * c.H, std::numeric_limits<float>::quiet_NaN());
  cpu::regroup_rows(recv.data(), counts.data(), c.ep, c.El, c.H, c.align, true, xe.data());
  return xe;
}

// Rank d's expert-major x under the all-to-all dispatcher.
inline std::vector<float> alltoall_rows(const GroupCase& c, const std::vector<Source>& src,
                                        int64_t d) {
  return alltoall_expert_major(c, src, send_order(c, src, &Source::x), d);
}

// The all-to-all's way back: rank d's expert-major rows (per_rank[d]) regrouped and returned to
// their sources, each source's rows in its send order [T*K, H] (dropped rows' places zero).
inline std::vector<std::vector<float>> alltoall_send_order(
    const GroupCase& c, const std::vector<Source>& src,
    const std::vector<std::vector<float>>& per_rank) {
  std::vector<std::vector<float>> send(c.ep, std::vector<float>(c.T * c.K * c.H, 0.0f));
  for (int64_t d = 0; d < c.ep; ++d) {
    std::vector<int32_t> counts(c.ep * c.El);
    for (int64_t s = 0; s < c.ep; ++s)
      std::copy_n(src[s].counts.begin() + d * c.El, c.El, counts.begin() + s * c.El);
    std::vector<float> rank_major(std::accumulate(counts.begin(), counts.end(), int64_t(0)) * c.H);
    cpu::regroup_rows(per_rank[d].data(), counts.data(), c.ep, c.El, c.H, c.align, false,
                      rank_major.data());
    int64_t at = 0;
    for (int64_t s = 0; s < c.ep; ++s) {
      const auto first = src[s].counts.begin() + d * c.El;
      const int64_t begin = std::accumulate(src[s].counts.begin(), first, int64_t(0));
      const int64_t n = std::accumulate(first, first + c.El, int64_t(0));
      std::copy_n(rank_major.begin() + at * c.H, n * c.H, send[s].begin() + begin * c.H);
      at += n;
    }
  }
  return send;
}

// Zeros in the padding rows of a rank's expert-major rows [offsets[E_local], H]: those after
// local expert l's received rows (the sum over sources of counts [ep, E_local]) up to
// offsets[l + 1].
inline void zero_padding(const GroupCase& c, const int32_t* counts,
                         const std::vector<int64_t>& offsets, std::vector<float>& rows) {
  for (int64_t l = 0; l < c.El; ++l) {
    int64_t n = 0;
    for (int64_t s = 0; s < c.ep; ++s) n += counts[s * c.El + l];
    std::fill(rows.begin() + (offsets[l] + n) * c.H, rows.begin() + offsets[l + 1] * c.H, 0.0f);
  }
}

// Expert e's stand-in for its FFN: y = scale(e) * x.
inline float expert_scale(int64_t e) { return 1.0f + 0.5f * float(e); }

}  // namespace moe::test
