// The deduplicated dispatcher (dispatch/alltoall_dedup.h) on EP ranks simulated in one process:
// its CPU kernels (dedup_layout, expert_major_positions, permute, the combines and sums) with the
// all-to-alls done by hand. Every rank's expert-major rows must be, row for row, those the
// all-to-all path gives it, padding zeros included, and so must dye and dp, bitwise. out and dx,
// summed per (token, rank) at the expert rank and stored in the storage dtype there, must be
// within MATH.md's tolerance of float64's and of the all-to-all path's (fp32: within fp32
// rounding).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "core/layout.h"
#include "core/workload.h"
#include "kernels/cpu/combine.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layout.h"
#include "kernels/cpu/permute.h"
#include "tests/common/expect_close.h"
#include "tests/common/simulated_group.h"

namespace moe {
namespace {

using test::expect_close;
using test::expert_scale;
using test::GroupCase;
using test::Source;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// One source rank's send plan and its wire rows.
struct Wire {
  std::vector<int32_t> pos, counts, slots;  // [T, ep], [ep], [W, K]
  std::vector<float> weights;               // [W, K]
  int64_t first(int64_t r) const {
    return std::accumulate(counts.begin(), counts.begin() + r, int64_t(0));
  }
};

Wire plan(const GroupCase& c, const Source& r) {
  const int64_t rows = c.T * std::min(c.K, c.ep);
  Wire w{std::vector<int32_t>(c.T * c.ep), std::vector<int32_t>(c.ep),
         std::vector<int32_t>(rows * c.K, -7), std::vector<float>(rows * c.K, kNaN)};
  cpu::dedup_layout(r.idx.data(), r.p.data(), r.counts.data(), r.send_pos.data(), c.T, c.K,
                    c.ep * c.El, c.ep, w.pos.data(), w.counts.data(), w.slots.data(),
                    w.weights.data());
  const int64_t W = w.first(c.ep);
  EXPECT_LE(W, rows);
  w.slots.resize(W * c.K);
  w.weights.resize(W * c.K);
  return w;
}

// A wire row for each (t, r) that takes one of t's kept rows, and only those; its slots and
// weights name exactly its kept rows on r.
void check_plan(const GroupCase& c, const Source& r, const Wire& w) {
  std::vector<int> seen(w.first(c.ep), 0);
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t d = 0; d < c.ep; ++d) {
      int kept = 0;
      for (int64_t k = 0; k < c.K; ++k)
        kept += r.send_pos[t * c.K + k] >= 0 && r.idx[t * c.K + k] / c.El == d;
      const int32_t row = w.pos[t * c.ep + d];
      ASSERT_EQ(row >= 0, kept > 0) << "t " << t << " rank " << d;
      if (row < 0) continue;
      ASSERT_TRUE(row >= w.first(d) && row < w.first(d + 1)) << "t " << t << " rank " << d;
      ++seen[row];
      int slots = 0;
      for (int64_t k = 0; k < c.K; ++k) slots += w.slots[row * c.K + k] >= 0;
      EXPECT_EQ(slots, kept);
    }
  for (int n : seen) EXPECT_EQ(n, 1);
}

// Rows [., width] of every source's wire plan for rank d, in source order, as an all-to-all
// lands them; first [ep + 1]: where each source's begin.
template <class V>
std::vector<V> landed(const GroupCase& c, const std::vector<Wire>& wires,
                      const std::vector<std::vector<V>>& rows, int64_t width, int64_t d,
                      std::vector<int64_t>* first = nullptr) {
  std::vector<V> out;
  if (first) first->assign(1, 0);
  for (int64_t s = 0; s < c.ep; ++s) {
    const int64_t a = wires[s].first(d), n = wires[s].counts[d];
    out.insert(out.end(), rows[s].begin() + a * width, rows[s].begin() + (a + n) * width);
    if (first) first->push_back(first->back() + n);
  }
  return out;
}

// The way back: rank d's rows [., width] (from[d], in landed's order) returned to each source's
// wire order.
std::vector<std::vector<float>> returned(const GroupCase& c, const std::vector<Wire>& wires,
                                         const std::vector<std::vector<float>>& from,
                                         int64_t width) {
  std::vector<std::vector<float>> back;
  for (const Wire& w : wires) back.emplace_back(w.first(c.ep) * width, kNaN);
  for (int64_t d = 0; d < c.ep; ++d) {
    int64_t at = 0;
    for (int64_t s = 0; s < c.ep; ++s) {
      const int64_t n = wires[s].counts[d] * width;
      std::copy_n(from[d].begin() + at, n, back[s].begin() + wires[s].first(d) * width);
      at += n;
    }
  }
  return back;
}

using test::rel_l2;

double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  return test::rel_l2(got, std::vector<float>(want.begin(), want.end()));
}

std::vector<float> flat(const std::vector<std::vector<float>>& v) {
  std::vector<float> out;
  for (const auto& part : v) out.insert(out.end(), part.begin(), part.end());
  return out;
}

void check_group(const GroupCase& c, DType dtype, uint64_t seed) {
  SCOPED_TRACE(c.name + " " + dtype_name(dtype));
  const std::vector<Source> src = test::make_sources(c, seed);
  std::vector<Wire> wires;
  std::vector<std::vector<float>> x_wire, dout_wire;
  std::vector<std::vector<int32_t>> slots;
  std::vector<std::vector<float>> weights;
  for (const Source& r : src) {
    wires.push_back(plan(c, r));
    check_plan(c, r, wires.back());
    const Wire& w = wires.back();
    x_wire.emplace_back(w.first(c.ep) * c.H, kNaN);
    dout_wire.emplace_back(w.first(c.ep) * c.H, kNaN);
    cpu::permute_rows(r.x.data(), w.pos.data(), c.T, c.ep, c.H, x_wire.back().data());
    cpu::permute_rows(r.dout.data(), w.pos.data(), c.T, c.ep, c.H, dout_wire.back().data());
    slots.push_back(w.slots);
    weights.push_back(w.weights);
  }

  // The expert ranks: rows in, expert-major rows, outputs, and what goes back.
  std::vector<std::vector<float>> ye_all(c.ep), dye_all(c.ep), part(c.ep), dp_part(c.ep),
      dx_part(c.ep);
  const std::vector<std::vector<float>> x_send = test::send_order(c, src, &Source::x);
  for (int64_t d = 0; d < c.ep; ++d) {
    SCOPED_TRACE("rank " + std::to_string(d));
    std::vector<int64_t> first;
    const std::vector<float> x_in = landed(c, wires, x_wire, c.H, d, &first);
    const std::vector<float> dout_in = landed(c, wires, dout_wire, c.H, d);
    const std::vector<int32_t> slot_in = landed(c, wires, slots, c.K, d);
    const std::vector<float> weight_in = landed(c, wires, weights, c.K, d);
    const int64_t R = first[c.ep];
    std::vector<int32_t> counts(c.ep * c.El), starts(c.ep * (c.El + 1)), dest(c.ep * c.El);
    for (int64_t s = 0; s < c.ep; ++s)
      std::copy_n(src[s].counts.begin() + d * c.El, c.El, counts.begin() + s * c.El);
    std::vector<int64_t> offsets(c.El + 1);
    block_layout(counts.data(), c.ep, c.El, c.align, nullptr, offsets.data(), starts.data(),
                 dest.data());
    std::vector<int32_t> pos(R * c.K, -7);
    for (int64_t s = 0; s < c.ep; ++s)
      cpu::expert_major_positions(slot_in.data() + first[s] * c.K, starts.data() + s * (c.El + 1),
                                  dest.data() + s * c.El, 1, (first[s + 1] - first[s]) * c.K, c.El,
                                  pos.data() + first[s] * c.K);
    std::vector<float> xe(offsets[c.El] * c.H, kNaN);
    cpu::permute_rows(x_in.data(), pos.data(), R, c.K, c.H, xe.data());
    test::zero_padding(c, counts.data(), offsets, xe);
    const std::vector<float> want = test::alltoall_expert_major(c, src, x_send, d);
    ASSERT_EQ(xe.size(), want.size());
    EXPECT_TRUE(std::equal(xe.begin(), xe.end(), want.begin())) << "expert-major rows differ";

    std::vector<float>& ye = ye_all[d];
    ye.resize(xe.size());
    for (int64_t l = 0; l < c.El; ++l)
      for (int64_t j = offsets[l] * c.H; j < offsets[l + 1] * c.H; ++j)
        ye[j] = cpu::store_as(dtype, expert_scale(d * c.El + l) * xe[j]);
    part[d].resize(R * c.H);
    cpu::unpermute_combine(ye.data(), pos.data(), weight_in.data(), R, c.K, c.H, dtype,
                           part[d].data());
    dye_all[d].assign(ye.size(), kNaN);
    dp_part[d].resize(R * c.K);
    cpu::unpermute_combine_bwd(dout_in.data(), ye.data(), pos.data(), weight_in.data(), R, c.K, c.H,
                               dtype, dye_all[d].data(), dp_part[d].data());
    test::zero_padding(c, counts.data(), offsets, dye_all[d]);
    // dx's stand-in: the experts' outputs again, as the all-gather test takes them.
    dx_part[d].resize(R * c.H);
    cpu::unpermute_sum_storage(ye.data(), pos.data(), R, c.K, c.H, dtype, dx_part[d].data());
  }

  // The tokens' ranks: the rows back, summed; and the all-to-all path on the same outputs.
  const auto out_back = returned(c, wires, part, c.H), dp_back = returned(c, wires, dp_part, c.K),
             dx_back = returned(c, wires, dx_part, c.H);
  const std::vector<std::vector<float>> y_send = test::alltoall_send_order(c, src, ye_all);
  std::vector<std::vector<float>> out(c.ep), dx(c.ep), out_a2a(c.ep), dx_a2a(c.ep), dy_send(c.ep);
  std::vector<double> out_ref, dx_ref, out_slack, dx_slack;
  for (int64_t s = 0; s < c.ep; ++s) {
    const Source& r = src[s];
    const Wire& w = wires[s];
    out[s].resize(c.T * c.H);
    dx[s].resize(c.T * c.H);
    std::vector<float> dp(c.T * c.K), dp_a2a(c.T * c.K);
    cpu::unpermute_sum_storage(out_back[s].data(), w.pos.data(), c.T, c.ep, c.H, dtype,
                               out[s].data());
    cpu::unpermute_sum(dp_back[s].data(), w.pos.data(), c.T, c.ep, c.K, dp.data());
    cpu::unpermute_sum(dx_back[s].data(), w.pos.data(), c.T, c.ep, c.H, dx[s].data());
    out_a2a[s].resize(c.T * c.H);
    dx_a2a[s].resize(c.T * c.H);
    dy_send[s].assign(c.T * c.K * c.H, 0.0f);
    cpu::unpermute_combine(y_send[s].data(), r.send_pos.data(), r.p.data(), c.T, c.K, c.H, dtype,
                           out_a2a[s].data());
    cpu::unpermute_combine_bwd(r.dout.data(), y_send[s].data(), r.send_pos.data(), r.p.data(), c.T,
                               c.K, c.H, dtype, dy_send[s].data(), dp_a2a.data());
    cpu::unpermute_sum(y_send[s].data(), r.send_pos.data(), c.T, c.K, c.H, dx_a2a[s].data());
    EXPECT_TRUE(std::equal(dp.begin(), dp.end(), dp_a2a.begin())) << "dp differs, source " << s;
    // float64 from the experts' stored outputs.
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t h = 0; h < c.H; ++h) {
        double o = 0, x = 0, so = 0, sx = 0;
        for (int64_t k = 0; k < c.K; ++k) {
          const int32_t row = r.send_pos[t * c.K + k];
          if (row < 0) continue;
          const double y = y_send[s][int64_t(row) * c.H + h];
          o += r.p[t * c.K + k] * y;
          so += std::fabs(r.p[t * c.K + k] * y);
          x += y;
          sx += std::fabs(y);
        }
        out_ref.push_back(o);
        dx_ref.push_back(x);
        out_slack.push_back(1e-6 * so);
        dx_slack.push_back(1e-6 * sx);
      }
  }
  for (int64_t d = 0; d < c.ep; ++d) {
    const std::vector<float> want = test::alltoall_expert_major(c, src, dy_send, d);
    EXPECT_TRUE(std::equal(dye_all[d].begin(), dye_all[d].end(), want.begin()))
        << "dye differs, rank " << d;
  }
  if (dtype == DType::kFp32) {
    expect_close("out", flat(out), out_ref, 1e-6, out_slack);
    expect_close("dx", flat(dx), dx_ref, 1e-6, dx_slack);
  } else {
    // Each partial sum is rounded to bf16 at the expert rank, the total once more at the source.
    EXPECT_LT(rel_l2(flat(out), out_ref), 1e-2);
    EXPECT_LT(rel_l2(flat(dx), dx_ref), 1e-2);
    EXPECT_LT(rel_l2(flat(out), flat(out_a2a)), 1e-2);
    EXPECT_LT(rel_l2(flat(dx), flat(dx_a2a)), 1e-2);
  }
}

TEST(DispatchDedup, MatchesAlltoallRowForRow) {
  std::vector<GroupCase> cases = test::group_cases();
  // And tokens whose K rows share ranks more or less.
  cases.push_back({"ep 8, K 6 over 2 experts a rank, align 4", 8, 2, 11, 6, 6, 4, 0, false, -1});
  cases.push_back({"ep 2, K 8 over 8 experts a rank", 2, 8, 10, 8, 16, 1, 0, false, -1});
  uint64_t seed = 1400;
  for (const GroupCase& c : cases)
    for (DType dtype : {DType::kFp32, DType::kBf16}) check_group(c, dtype, seed++);
}

// A worked example: 3 tokens, K 3, ep 2 (experts 0-1 on rank 0, 2-3 on rank 1).
TEST(DispatchDedup, DedupLayoutByHand) {
  const std::vector<int32_t> idx = {0, 1, 2,   // token 0: both ranks
                                    2, 3, 0,   // token 1: both ranks, (1, 2) dropped
                                    3, 2, 1};  // token 2: rank 1, and rank 0 for expert 1
  const std::vector<float> p = {0.5f, 0.25f, 0.125f, 1, 2, 3, 4, 5, 6};
  // Send order: expert 0 (t0k0), 1 (t0k1, t2k2), 2 (t0k2, t1k0, t2k1), 3 (t1k1, t2k0).
  const std::vector<int32_t> counts = {1, 2, 3, 2};
  const std::vector<int32_t> send_pos = {0, 1, 3, 4, 6, -1, 7, 5, 2};
  std::vector<int32_t> wire_pos(6), wire_counts(2), slots(6 * 3);
  std::vector<float> weights(6 * 3);
  cpu::dedup_layout(idx.data(), p.data(), counts.data(), send_pos.data(), 3, 3, 4, 2,
                    wire_pos.data(), wire_counts.data(), slots.data(), weights.data());
  EXPECT_EQ(wire_counts, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(wire_pos, (std::vector<int32_t>{0, 2, -1, 3, 1, 4}));  // [t, rank]
  // Rank 1's slots count from its first send position (3).
  EXPECT_EQ(slots, (std::vector<int32_t>{0, 1, -1,    // (t0, rank 0)
                                         -1, -1, 2,   // (t2, rank 0)
                                         -1, -1, 0,   // (t0, rank 1)
                                         1, 3, -1,    // (t1, rank 1)
                                         4, 2, -1,    // (t2, rank 1)
                                         0, 0, 0}));  // room for T * min(K, ep) rows
  EXPECT_EQ(weights,
            (std::vector<float>{0.5f, 0.25f, 0, 0, 0, 6, 0, 0, 0.125f, 1, 2, 0, 4, 5, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace moe
