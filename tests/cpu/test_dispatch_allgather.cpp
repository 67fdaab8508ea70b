// The all-gather dispatcher's layout (core/layout.h gathered_layout, kernels/cpu/layout.h
// expert_major_positions) on EP ranks simulated in one process. Every rank's expert-major rows
// must be, row for row, those the all-to-all path gives it (permute, the exchange of send-order
// blocks, regroup), padding zeros included: the experts see the same inputs under both
// dispatchers. The combines over the gathered tokens, summed over ranks as the reduce-scatters
// sum them, must give float64's out, dp and dx, each dp from exactly one rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/layout.h"
#include "core/workload.h"
#include "kernels/cpu/combine.h"
#include "kernels/cpu/layout.h"
#include "kernels/cpu/permute.h"
#include "tests/common/expect_close.h"
#include "tests/common/simulated_group.h"

namespace moe {
namespace {

using test::alltoall_rows;
using test::expect_close;
using test::expert_scale;
using test::GroupCase;
using test::make_sources;
using test::Source;

// Rank d's side of the all-gather dispatcher: its positions, its experts' row offsets, and its
// expert-major rows from the gathered tokens (padding zeros).
struct RankView {
  std::vector<int32_t> pos;
  std::vector<int64_t> offsets;
  std::vector<float> xe;
};

RankView allgather_rows(const GroupCase& c, const std::vector<Source>& src, int64_t d) {
  const int64_t E = c.ep * c.El;
  std::vector<int32_t> counts_all, send_pos_all;
  std::vector<float> x_all;
  for (const Source& r : src) {
    counts_all.insert(counts_all.end(), r.counts.begin(), r.counts.end());
    send_pos_all.insert(send_pos_all.end(), r.send_pos.begin(), r.send_pos.end());
    x_all.insert(x_all.end(), r.x.begin(), r.x.end());
  }
  std::vector<int32_t> recv(c.ep * c.El), starts(c.ep * (c.El + 1)), dest(c.ep * c.El);
  RankView v;
  v.offsets.resize(c.El + 1);
  gathered_layout(counts_all.data(), c.ep, E, d, c.align, recv.data(), v.offsets.data(),
                  starts.data(), dest.data());
  for (int64_t s = 0; s < c.ep; ++s)
    for (int64_t l = 0; l < c.El; ++l)
      EXPECT_EQ(recv[s * c.El + l], src[s].counts[d * c.El + l]) << "source " << s << " l " << l;
  v.pos.resize(c.ep * c.T * c.K);
  cpu::expert_major_positions(send_pos_all.data(), starts.data(), dest.data(), c.ep, c.T * c.K,
                              c.El, v.pos.data());
  v.xe.assign(v.offsets[c.El] * c.H, std::numeric_limits<float>::quiet_NaN());
  cpu::permute_rows(x_all.data(), v.pos.data(), c.ep * c.T, c.K, c.H, v.xe.data());
  test::zero_padding(c, recv.data(), v.offsets, v.xe);
  return v;
}

void check_group(const GroupCase& c, uint64_t seed) {
  SCOPED_TRACE(c.name);
  const std::vector<Source> src = make_sources(c, seed);
  const int64_t n = c.ep * c.T * c.K, rows_all = c.ep * c.T;
  std::vector<float> p_all, dout_all;
  for (const Source& r : src) {
    p_all.insert(p_all.end(), r.p.begin(), r.p.end());
    dout_all.insert(dout_all.end(), r.dout.begin(), r.dout.end());
  }
  // What the reduce-scatters sum: every rank's partial out, dp and dx, in rank order.
  std::vector<float> out(rows_all * c.H, 0.0f), dp(n, 0.0f), dx(rows_all * c.H, 0.0f);
  std::vector<int> owners(n, 0);
  for (int64_t d = 0; d < c.ep; ++d) {
    SCOPED_TRACE("rank " + std::to_string(d));
    const RankView v = allgather_rows(c, src, d);
    const std::vector<float> want = alltoall_rows(c, src, d);
    ASSERT_EQ(v.xe.size(), want.size());
    EXPECT_TRUE(std::equal(v.xe.begin(), v.xe.end(), want.begin())) << "expert-major rows differ";
    for (int64_t i = 0; i < n; ++i) owners[i] += v.pos[i] >= 0;

    std::vector<float> ye(v.xe.size());
    for (int64_t l = 0; l < c.El; ++l)
      for (int64_t j = v.offsets[l] * c.H; j < v.offsets[l + 1] * c.H; ++j)
        ye[j] = expert_scale(d * c.El + l) * v.xe[j];
    std::vector<float> part(rows_all * c.H), dye(ye.size()), dp_part(n), dx_part(rows_all * c.H);
    cpu::unpermute_combine(ye.data(), v.pos.data(), p_all.data(), rows_all, c.K, c.H, DType::kFp32,
                           part.data());
    cpu::unpermute_combine_bwd(dout_all.data(), ye.data(), v.pos.data(), p_all.data(), rows_all,
                               c.K, c.H, DType::kFp32, dye.data(), dp_part.data());
    cpu::unpermute_sum(ye.data(), v.pos.data(), rows_all, c.K, c.H, dx_part.data());
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] += part[i];
      dx[i] += dx_part[i];
    }
    for (int64_t i = 0; i < n; ++i) dp[i] += dp_part[i];
  }

  std::vector<double> out_ref(out.size(), 0.0), dx_ref(dx.size(), 0.0), dp_ref(n, 0.0);
  std::vector<double> out_slack(out.size(), 0.0), dx_slack(dx.size(), 0.0), dp_slack(n, 0.0);
  for (int64_t s = 0; s < c.ep; ++s)
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t k = 0; k < c.K; ++k) {
        const Source& r = src[s];
        const int64_t i = (s * c.T + t) * c.K + k;
        const bool kept = r.send_pos[t * c.K + k] >= 0;
        EXPECT_EQ(owners[i], kept ? 1 : 0) << "row " << i;
        if (!kept) continue;
        const double scale = expert_scale(r.idx[t * c.K + k]);
        for (int64_t h = 0; h < c.H; ++h) {
          const int64_t o = (s * c.T + t) * c.H + h;
          const double y = scale * r.x[t * c.H + h];
          out_ref[o] += r.p[t * c.K + k] * y;
          out_slack[o] += 1e-6 * std::fabs(r.p[t * c.K + k] * y);
          dx_ref[o] += y;
          dx_slack[o] += 1e-6 * std::fabs(y);
          dp_ref[i] += y * r.dout[t * c.H + h];
          dp_slack[i] += 1e-6 * std::fabs(y * r.dout[t * c.H + h]);
        }
      }
  expect_close("out", out, out_ref, 1e-6, out_slack);
  expect_close("dx", dx, dx_ref, 1e-6, dx_slack);
  expect_close("dp", dp, dp_ref, 1e-6, dp_slack);
}

TEST(DispatchAllgather, MatchesAlltoallRowForRow) {
  uint64_t seed = 900;
  for (const GroupCase& c : test::group_cases()) check_group(c, seed++);
}

// A worked example: rank 1 of ep 2 (experts 2 and 3), align 4.
TEST(DispatchAllgather, GatheredLayoutByHand) {
  const std::vector<int32_t> counts_all = {1, 2, 3, 0,   // source 0
                                           0, 1, 2, 2};  // source 1
  std::vector<int32_t> recv(4), starts(6), dest(4);
  std::vector<int64_t> offsets(3);
  gathered_layout(counts_all.data(), 2, 4, 1, 4, recv.data(), offsets.data(), starts.data(),
                  dest.data());
  EXPECT_EQ(recv, (std::vector<int32_t>{3, 0, 2, 2}));
  // Expert 2 gets 3 + 2 rows (padded to 8), expert 3 gets 0 + 2 (padded to 4).
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 8, 12}));
  EXPECT_EQ(starts, (std::vector<int32_t>{3, 6, 6, 1, 3, 5}));
  EXPECT_EQ(dest, (std::vector<int32_t>{0, 8, 3, 8}));

  // Source 0's send order holds experts 0, 1, 1, 2, 2, 2; source 1's 1, 2, 2, 3, 3 (-1: dropped).
  const std::vector<int32_t> send_pos = {0, 1, 2, 3, 4, 5, -1, /**/ 0, 1, 2, 3, 4, -1, -1};
  std::vector<int32_t> pos(send_pos.size());
  cpu::expert_major_positions(send_pos.data(), starts.data(), dest.data(), 2, 7, 2, pos.data());
  EXPECT_EQ(pos, (std::vector<int32_t>{-1, -1, -1, 0, 1, 2, -1, /**/ -1, 3, 4, 8, 9, -1, -1}));
}

// The table the dispatchers keep on the device (core/layout.h expert_block_table, read from the
// counts where they lie) is gathered_layout's, with each expert's rows after it.
TEST(DispatchAllgather, BlockTableIsTheGatheredLayout) {
  const std::vector<int32_t> counts_all = {1, 2, 3, 0,   // source 0
                                           0, 1, 2, 2};  // source 1
  std::vector<int32_t> recv(4), starts(6), dest(4);
  std::vector<int64_t> offsets(3), table_offsets(3, -1);
  gathered_layout(counts_all.data(), 2, 4, 1, 4, recv.data(), offsets.data(), starts.data(),
                  dest.data());
  ASSERT_EQ(expert_block_table_entries(2, 2), 6 + 4 + 2);
  std::vector<int32_t> table(12, -1);
  expert_block_table(counts_all.data(), 2, 4, 2, 2, 4, table.data(), table_offsets.data());
  EXPECT_EQ(table_offsets, offsets);
  EXPECT_EQ(std::vector<int32_t>(table.begin(), table.begin() + 6), starts);
  EXPECT_EQ(std::vector<int32_t>(table.begin() + 6, table.begin() + 10), dest);
  EXPECT_EQ(std::vector<int32_t>(table.begin() + 10, table.end()), (std::vector<int32_t>{5, 2}));
}

}  // namespace
}  // namespace moe
