// The dispatch and combine kernels of the CPU backend (layout, permute, regroup, combine and their
// backward passes) against naive float64 / integer versions written here, on seeded random data.
// Integers and moved rows must match exactly; sums within the dtype's tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "core/layout.h"
#include "core/workload.h"
#include "kernels/cpu/combine.h"
#include "kernels/cpu/layout.h"
#include "kernels/cpu/permute.h"
#include "tests/common/expect_close.h"

namespace moe {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int kShow = 8;  // mismatches printed per failed comparison

std::vector<float> random_floats(std::mt19937_64& rng, int64_t n, bool bf16) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = bf16 ? round_to_bf16(d(rng)) : d(rng);
  return v;
}

// idx [T, K]: for every token K distinct experts drawn from `allowed`, in random order.
std::vector<int32_t> random_idx(std::mt19937_64& rng, int64_t T, int64_t K,
                                std::vector<int32_t> allowed) {
  std::vector<int32_t> idx(T * K);
  for (int64_t t = 0; t < T; ++t) {
    std::shuffle(allowed.begin(), allowed.end(), rng);
    for (int64_t k = 0; k < K; ++k) idx[t * K + k] = allowed[k];
  }
  return idx;
}

std::vector<int32_t> all_experts_but(int64_t E, const std::vector<int32_t>& excluded) {
  std::vector<int32_t> v;
  for (int32_t e = 0; e < E; ++e)
    if (std::find(excluded.begin(), excluded.end(), e) == excluded.end()) v.push_back(e);
  return v;
}

// The layout by definition: sort the (expert, t*K + k) pairs; a slot's position is its rank.
void naive_layout(const std::vector<int32_t>& idx, int64_t E, std::vector<int32_t>& counts,
                  std::vector<int32_t>& send_pos) {
  counts.assign(E, 0);
  send_pos.assign(idx.size(), -1);
  std::vector<std::pair<int32_t, int64_t>> order;
  for (int64_t i = 0; i < int64_t(idx.size()); ++i) {
    ++counts[idx[i]];
    order.push_back({idx[i], i});
  }
  std::sort(order.begin(), order.end());
  for (int64_t j = 0; j < int64_t(order.size()); ++j) send_pos[order[j].second] = int32_t(j);
}

// Exact comparison (NaN never equals anything, so an unwritten NaN-prefilled row fails).
template <typename T>
void expect_equal(const char* what, const std::vector<T>& got, const std::vector<T>& want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::ostringstream os;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (bad++ < kShow) os << "\n  [" << i << "] got " << got[i] << " want " << want[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " differ" << os.str();
}

using test::expect_close;

void expect_bf16_representable(const char* what, const std::vector<float>& v) {
  int64_t bad = 0;
  for (float x : v) bad += round_to_bf16(x) != x;
  EXPECT_EQ(bad, 0) << what << ": values not representable in bf16";
}

// ---- dispatch_layout ----------------------------------------------------------------------------

void check_layout(const std::vector<int32_t>& idx, int64_t T, int64_t K, int64_t E) {
  std::vector<int32_t> counts(E, -7), send_pos(T * K, -7);
  cpu::dispatch_layout(idx.data(), nullptr, T, K, E, 0, false, counts.data(), send_pos.data());
  std::vector<int32_t> want_counts, want_pos;
  naive_layout(idx, E, want_counts, want_pos);
  expect_equal("expert_counts", counts, want_counts);
  expect_equal("send_pos", send_pos, want_pos);

  // A bijection onto [0, T*K), and each expert's rows form the block at its prefix sum.
  std::vector<int> hits(T * K, 0);
  for (int32_t pos : send_pos) {
    ASSERT_GE(pos, 0);
    ASSERT_LT(pos, T * K);
    ++hits[pos];
  }
  EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
  std::vector<int64_t> begin(E + 1, 0);
  for (int64_t e = 0; e < E; ++e) begin[e + 1] = begin[e] + want_counts[e];
  for (int64_t i = 0; i < T * K; ++i) {
    EXPECT_GE(send_pos[i], begin[idx[i]]) << "slot " << i;
    EXPECT_LT(send_pos[i], begin[idx[i] + 1]) << "slot " << i;
  }
}

TEST(DispatchLayout, RandomRoutingMatchesSortByExpertThenSlot) {
  std::mt19937_64 rng(11);
  const int64_t T = 37, K = 4, E = 16;
  check_layout(random_idx(rng, T, K, all_experts_but(E, {})), T, K, E);
}

TEST(DispatchLayout, ExpertsWithNoTokens) {
  std::mt19937_64 rng(12);
  const int64_t T = 29, K = 3, E = 16;
  // First, last and a middle expert get nothing.
  std::vector<int32_t> idx = random_idx(rng, T, K, all_experts_but(E, {0, 7, 8, 15}));
  check_layout(idx, T, K, E);
  std::vector<int32_t> counts(E), send_pos(T * K);
  cpu::dispatch_layout(idx.data(), nullptr, T, K, E, 0, false, counts.data(), send_pos.data());
  for (int e : {0, 7, 8, 15}) EXPECT_EQ(counts[e], 0) << "expert " << e;
}

TEST(DispatchLayout, AllExpertsOfATokenOnOneEpRank) {
  std::mt19937_64 rng(13);
  const int64_t T = 24, K = 4, E = 16, ep = 4, E_local = E / ep;
  // Token t sends all K copies to EP rank t % ep (its experts in a random order).
  std::vector<int32_t> idx(T * K);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> local(E_local);
    std::iota(local.begin(), local.end(), int32_t((t % ep) * E_local));
    std::shuffle(local.begin(), local.end(), rng);
    for (int64_t k = 0; k < K; ++k) idx[t * K + k] = local[k];
  }
  check_layout(idx, T, K, E);

  // Each rank's block of the send buffer holds exactly the rows of its tokens.
  std::vector<int32_t> counts(E), send_pos(T * K);
  cpu::dispatch_layout(idx.data(), nullptr, T, K, E, 0, false, counts.data(), send_pos.data());
  std::vector<int64_t> rank_begin(ep + 1, 0);
  for (int64_t r = 0; r < ep; ++r)
    rank_begin[r + 1] = rank_begin[r] + std::accumulate(counts.begin() + r * E_local,
                                                        counts.begin() + (r + 1) * E_local, 0);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t r = t % ep;
    EXPECT_EQ(rank_begin[r + 1] - rank_begin[r], (T / ep) * K) << "rank " << r;
    for (int64_t k = 0; k < K; ++k) {
      EXPECT_GE(send_pos[t * K + k], rank_begin[r]) << "t " << t << " k " << k;
      EXPECT_LT(send_pos[t * K + k], rank_begin[r + 1]) << "t " << t << " k " << k;
    }
  }
}

TEST(DispatchLayout, NoTokens) {
  const int64_t E = 8;
  std::vector<int32_t> counts(E, -7);
  cpu::dispatch_layout(nullptr, nullptr, 0, 2, E, 0, false, counts.data(), nullptr);
  expect_equal("expert_counts", counts, std::vector<int32_t>(E, 0));
}

// ---- permute_rows ------------------------------------------------------------------------------

TEST(DispatchPermute, RowLandsAtEverySendPos) {
  std::mt19937_64 rng(21);
  const int64_t T = 19, K = 3, E = 8, H = 21;
  const std::vector<int32_t> idx = random_idx(rng, T, K, all_experts_but(E, {2}));
  const std::vector<float> x = random_floats(rng, T * H, false);
  std::vector<int32_t> counts(E), send_pos(T * K);
  cpu::dispatch_layout(idx.data(), nullptr, T, K, E, 0, false, counts.data(), send_pos.data());

  std::vector<float> dst(T * K * H, kNaN);
  cpu::permute_rows(x.data(), send_pos.data(), T, K, H, dst.data());
  std::vector<float> want(T * K * H, kNaN);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t h = 0; h < H; ++h) want[send_pos[t * K + k] * H + h] = x[t * H + h];
  expect_equal("send rows", dst, want);
}

// ---- regroup_rows ------------------------------------------------------------------------------

// A row that tells where it came from: (source rank s, local expert l, j-th row of the block).
float tag(int64_t s, int64_t l, int64_t j, int64_t h) {
  return float(s * 1000000 + l * 10000 + j * 100 + h);
}

void check_regroup(const std::vector<int32_t>& counts, int64_t ep, int64_t E_local, int64_t H) {
  const int64_t R = std::accumulate(counts.begin(), counts.end(), int64_t(0));
  // Source-rank-major input, and the expert-major order built by definition.
  std::vector<float> rank_major, expert_major;
  for (int64_t s = 0; s < ep; ++s)
    for (int64_t l = 0; l < E_local; ++l)
      for (int64_t j = 0; j < counts[s * E_local + l]; ++j)
        for (int64_t h = 0; h < H; ++h) rank_major.push_back(tag(s, l, j, h));
  for (int64_t l = 0; l < E_local; ++l)
    for (int64_t s = 0; s < ep; ++s)
      for (int64_t j = 0; j < counts[s * E_local + l]; ++j)
        for (int64_t h = 0; h < H; ++h) expert_major.push_back(tag(s, l, j, h));
  ASSERT_EQ(int64_t(rank_major.size()), R * H);

  std::vector<float> fwd(R * H, kNaN), back(R * H, kNaN);
  cpu::regroup_rows(rank_major.data(), counts.data(), ep, E_local, H, 1, true, fwd.data());
  expect_equal("to expert-major", fwd, expert_major);
  cpu::regroup_rows(fwd.data(), counts.data(), ep, E_local, H, 1, false, back.data());
  expect_equal("round trip", back, rank_major);
}

TEST(DispatchRegroup, ExpertMajorOrderAndRoundTrip) {
  const int64_t ep = 4, E_local = 3, H = 5;
  // counts[s, l]: zeros scattered, source rank 2 sends nothing, local expert 1 gets nothing
  // from ranks 0 and 3.
  const std::vector<int32_t> counts = {2, 0, 3,  //
                                       1, 4, 0,  //
                                       0, 0, 0,  //
                                       5, 0, 1};
  check_regroup(counts, ep, E_local, H);
}

TEST(DispatchRegroup, RandomCountsRoundTrip) {
  std::mt19937_64 rng(31);
  std::uniform_int_distribution<int32_t> d(0, 6);
  const int64_t ep = 8, E_local = 4, H = 17;
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<int32_t> counts(ep * E_local);
    for (auto& c : counts) c = d(rng) < 2 ? 0 : d(rng);
    SCOPED_TRACE("rep " + std::to_string(rep));
    check_regroup(counts, ep, E_local, H);
  }
}

TEST(DispatchRegroup, OneSourceOneExpertIsACopy) { check_regroup({6}, 1, 1, 9); }

TEST(DispatchRegroup, RankReceivingNothing) {
  // R = 0: nothing to move, and it must not touch (or need) the buffers.
  const std::vector<int32_t> counts(4 * 2, 0);
  cpu::regroup_rows(nullptr, counts.data(), 4, 2, 16, 1, true, nullptr);
  cpu::regroup_rows(nullptr, counts.data(), 4, 2, 16, 1, false, nullptr);
  check_regroup(counts, 4, 2, 16);
}

// A pipelined step's chunks, each with its own expert-major rows (counts [ep, stride] per chunk,
// align padding, its rows from row_begin on, NaN between), gathered for the weight gradients: each
// expert's rows by source, then chunk, then row, padded once, is the unchunked step's order and
// its offsets the unchunked step's (expert_major_offsets over the chunks' summed counts).
void check_merged_chunks(int64_t C, int64_t ep, int64_t El, int64_t align, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, 9);
  const int64_t stride = El + 2, H = 3;
  std::vector<std::vector<int32_t>> counts(C, std::vector<int32_t>(ep * stride));
  std::vector<std::vector<int64_t>> offsets(C, std::vector<int64_t>(El + 1));
  std::vector<ChunkRows> chunks(C);
  std::vector<int32_t> summed(ep * El, 0);
  int64_t rows = 0;
  for (int64_t c = 0; c < C; ++c) {
    for (int32_t& n : counts[c]) n = d(rng) < 3 ? 0 : d(rng);
    expert_major_offsets_strided(counts[c].data(), ep, stride, El, align, offsets[c].data());
    chunks[c] = {counts[c].data(), stride, offsets[c].data(), rows + 3};
    rows += 3 + offsets[c][El];
    for (int64_t s = 0; s < ep; ++s)
      for (int64_t l = 0; l < El; ++l) summed[s * El + l] += counts[c][s * stride + l];
  }
  std::vector<float> src(rows * H, kNaN);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t l = 0; l < El; ++l) {
      int64_t r = chunks[c].row_begin + offsets[c][l];
      for (int64_t s = 0; s < ep; ++s)
        for (int64_t j = 0; j < counts[c][s * stride + l]; ++j, ++r)
          for (int64_t h = 0; h < H; ++h) src[r * H + h] = tag(s, l, c * 10 + j, h);
    }
  std::vector<int64_t> want_offsets(El + 1), got_offsets(El + 1);
  expert_major_offsets(summed.data(), ep, El, align, want_offsets.data());
  std::vector<float> want;
  for (int64_t l = 0; l < El; ++l) {
    for (int64_t s = 0; s < ep; ++s)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t j = 0; j < counts[c][s * stride + l]; ++j)
          for (int64_t h = 0; h < H; ++h) want.push_back(tag(s, l, c * 10 + j, h));
    want.resize(want_offsets[l + 1] * H, 0.0f);
  }
  std::vector<int64_t> blocks(3 * merged_chunk_blocks(C, ep, El));
  merged_chunk_layout(chunks.data(), C, ep, El, align, got_offsets.data(), blocks.data());
  expect_equal("offsets", got_offsets, want_offsets);
  std::vector<float> got(want.size(), kNaN);
  cpu::gather_chunk_rows(got_offsets.data(), blocks.data(), C, ep, El, src.data(),
                         sizeof(float) * H, got.data());
  expect_equal("rows", got, want);
}

TEST(DispatchMergedChunks, TheUnchunkedOrderAndPadding) {
  uint64_t seed = 5;
  for (int64_t C : {1, 2, 4})
    for (int64_t ep : {1, 3})
      for (int64_t El : {1, 4})
        for (int64_t align : {1, 4}) {
          SCOPED_TRACE("C " + std::to_string(C) + " ep " + std::to_string(ep) + " E_local " +
                       std::to_string(El) + " align " + std::to_string(align));
          check_merged_chunks(C, ep, El, align, seed++);
        }
}

// ---- unpermute_combine and its backward --------------------------------------------------------

struct CombineCase {
  int64_t T, K, E, H;
  std::vector<int32_t> idx, send_pos, counts;
  std::vector<float> p, y_send, dout;
};

CombineCase make_combine_case(uint64_t seed, int64_t T, int64_t K, int64_t E, int64_t H,
                              bool bf16) {
  std::mt19937_64 rng(seed);
  CombineCase c{T, K, E, H, {}, {}, {}, {}, {}, {}};
  c.idx = random_idx(rng, T, K, all_experts_but(E, {1}));
  c.send_pos.resize(T * K);
  c.counts.resize(E);
  cpu::dispatch_layout(c.idx.data(), nullptr, T, K, E, 0, false, c.counts.data(),
                       c.send_pos.data());
  c.p = random_floats(rng, T * K, false);  // router weights are fp32
  for (auto& v : c.p) v = 0.5f * (v + 1.0f);
  c.y_send = random_floats(rng, T * K * H, bf16);
  c.dout = random_floats(rng, T * H, bf16);
  return c;
}

void check_combine(DType dtype) {
  const bool bf16 = dtype == DType::kBf16;
  const CombineCase c = make_combine_case(bf16 ? 41 : 42, 23, 4, 12, 40, bf16);
  const int64_t T = c.T, K = c.K, H = c.H;
  std::vector<float> out(T * H, kNaN);
  cpu::unpermute_combine(c.y_send.data(), c.send_pos.data(), c.p.data(), T, K, H, dtype,
                         out.data());

  std::vector<double> ref(T * H, 0.0), slack(T * H, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t h = 0; h < H; ++h) {
        const double term = double(c.p[t * K + k]) * c.y_send[c.send_pos[t * K + k] * H + h];
        ref[t * H + h] += term;
        slack[t * H + h] += 1e-6 * std::fabs(term);
      }
  // bf16: one rounding of the fp32 sum, at most one bf16 ulp (2^-7) relative.
  expect_close("out", out, ref, bf16 ? 8e-3 : 1e-6, slack);
  if (bf16) expect_bf16_representable("out", out);
}

TEST(DispatchCombine, Fp32) { check_combine(DType::kFp32); }
TEST(DispatchCombine, Bf16) { check_combine(DType::kBf16); }

void check_combine_bwd(DType dtype) {
  const bool bf16 = dtype == DType::kBf16;
  const CombineCase c = make_combine_case(bf16 ? 51 : 52, 21, 3, 10, 64, bf16);
  const int64_t T = c.T, K = c.K, H = c.H;
  std::vector<float> dy(T * K * H, kNaN), dp(T * K, kNaN);
  cpu::unpermute_combine_bwd(c.dout.data(), c.y_send.data(), c.send_pos.data(), c.p.data(), T, K, H,
                             dtype, dy.data(), dp.data());

  // dy: the fp32 product p * dout is exact in double then rounded once, so it must match exactly.
  std::vector<float> want_dy(T * K * H, kNaN);
  std::vector<double> ref_dp(T * K, 0.0), slack_dp(T * K, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t row = c.send_pos[t * K + k];
      for (int64_t h = 0; h < H; ++h) {
        const float prod = float(double(c.p[t * K + k]) * double(c.dout[t * H + h]));
        want_dy[row * H + h] = bf16 ? round_to_bf16(prod) : prod;
        const double term = double(c.y_send[row * H + h]) * c.dout[t * H + h];
        ref_dp[t * K + k] += term;
        slack_dp[t * K + k] += 2e-6 * std::fabs(term);
      }
    }
  expect_equal("dy_send", dy, want_dy);
  expect_close("dp", dp, ref_dp, 1e-5, slack_dp);
}

TEST(DispatchCombineBwd, Fp32) { check_combine_bwd(DType::kFp32); }
TEST(DispatchCombineBwd, Bf16) { check_combine_bwd(DType::kBf16); }

TEST(DispatchUnpermuteSum, MatchesFloat64) {
  const CombineCase c = make_combine_case(61, 17, 5, 9, 33, false);
  const int64_t T = c.T, K = c.K, H = c.H;
  std::vector<float> dx(T * H, kNaN);  // overwritten, not accumulated into
  cpu::unpermute_sum(c.y_send.data(), c.send_pos.data(), T, K, H, dx.data());
  std::vector<double> ref(T * H, 0.0), slack(T * H, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t h = 0; h < H; ++h) {
        const double v = c.y_send[c.send_pos[t * K + k] * H + h];
        ref[t * H + h] += v;
        slack[t * H + h] += 1e-6 * std::fabs(v);
      }
  expect_close("dx_acc", dx, ref, 1e-6, slack);
}

TEST(DispatchUnpermuteSum, IsTheAdjointOfPermute) {
  // <permute(x), g> == <x, unpermute_sum(g)> for any x, g (exactly, in float64, up to rounding).
  const CombineCase c = make_combine_case(62, 13, 3, 7, 20, false);
  const int64_t T = c.T, K = c.K, H = c.H;
  std::vector<float> px(T * K * H), sg(T * H);
  cpu::permute_rows(c.dout.data(), c.send_pos.data(), T, K, H, px.data());
  cpu::unpermute_sum(c.y_send.data(), c.send_pos.data(), T, K, H, sg.data());
  double lhs = 0, rhs = 0, scale = 0;
  for (int64_t i = 0; i < T * K * H; ++i) {
    lhs += double(px[i]) * c.y_send[i];
    scale += std::fabs(double(px[i]) * c.y_send[i]);
  }
  for (int64_t i = 0; i < T * H; ++i) rhs += double(c.dout[i]) * sg[i];
  EXPECT_NEAR(lhs, rhs, 1e-6 * scale);
}

// ---- end to end, without communication ---------------------------------------------------------

// Expert e multiplies its rows by expert_scale(e) (1 for the identity experts).
using ExpertScale = float (*)(int64_t);

void check_single_rank_dispatch(ExpertScale expert_scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t T = 31, K = 4, E = 10, H = 24;
  const std::vector<int32_t> idx = random_idx(rng, T, K, all_experts_but(E, {0, 6}));
  const std::vector<float> x = random_floats(rng, T * H, true);
  std::vector<float> p = random_floats(rng, T * K, false);
  for (auto& v : p) v = 0.5f * (v + 1.0f);

  std::vector<int32_t> counts(E), send_pos(T * K);
  cpu::dispatch_layout(idx.data(), nullptr, T, K, E, 0, false, counts.data(), send_pos.data());
  const int64_t R = T * K;
  std::vector<float> send(R * H, kNaN), xe(R * H, kNaN), ye(R * H, kNaN), back(R * H, kNaN);
  cpu::permute_rows(x.data(), send_pos.data(), T, K, H, send.data());
  // ep = 1: the received buffer is the send buffer, counts [1, E] = expert_counts.
  cpu::regroup_rows(send.data(), counts.data(), 1, E, H, 1, true, xe.data());
  int64_t row = 0;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t j = 0; j < counts[e]; ++j, ++row)
      for (int64_t h = 0; h < H; ++h) ye[row * H + h] = expert_scale(e) * xe[row * H + h];
  cpu::regroup_rows(ye.data(), counts.data(), 1, E, H, 1, false, back.data());
  std::vector<float> out(T * H, kNaN);
  cpu::unpermute_combine(back.data(), send_pos.data(), p.data(), T, K, H, DType::kFp32, out.data());

  std::vector<double> ref(T * H, 0.0), slack(T * H, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t h = 0; h < H; ++h) {
        const double term =
            double(p[t * K + k]) * expert_scale(idx[t * K + k]) * double(x[t * H + h]);
        ref[t * H + h] += term;
        slack[t * H + h] += 1e-6 * std::fabs(term);
      }
  expect_close("out", out, ref, 1e-6, slack);
}

TEST(DispatchEndToEnd, SingleRankIdentityExperts) {
  check_single_rank_dispatch([](int64_t) { return 1.0f; }, 71);
}

TEST(DispatchEndToEnd, SingleRankRowsReachTheirExpert) {
  check_single_rank_dispatch([](int64_t e) { return float(e + 1); }, 72);
}

// Several EP ranks simulated in one process, the all-to-all done by hand from the layout's
// contract: rank s sends destination d the block of its send buffer for experts of d; d receives
// the blocks in source order, so counts_d[s, l] = expert_counts_s[d * E_local + l]. Source rank 1
// has no tokens and EP rank 2's experts are never picked (it receives R = 0).
TEST(DispatchEndToEnd, SimulatedEpAllToAll) {
  std::mt19937_64 rng(81);
  const int64_t ep = 3, E_local = 2, E = ep * E_local, K = 2, H = 12;
  const std::vector<int64_t> tokens = {9, 0, 6};
  const std::vector<int32_t> allowed = {0, 1, 2};  // experts 3..5 get nothing
  auto expert_scale = [](int64_t e) { return float(e + 1); };

  struct Source {
    std::vector<int32_t> idx, counts, send_pos;
    std::vector<float> x, p, send, y_send;
    std::vector<int64_t> block_begin;  // [ep + 1]: rows of the send buffer for each destination
  };
  std::vector<Source> src(ep);
  for (int64_t s = 0; s < ep; ++s) {
    Source& r = src[s];
    const int64_t T = tokens[s];
    r.idx = random_idx(rng, T, K, allowed);
    r.x = random_floats(rng, T * H, true);
    r.p = random_floats(rng, T * K, false);
    r.counts.resize(E);
    r.send_pos.resize(T * K);
    cpu::dispatch_layout(r.idx.data(), nullptr, T, K, E, 0, false, r.counts.data(),
                         r.send_pos.data());
    r.send.assign(T * K * H, kNaN);
    r.y_send.assign(T * K * H, kNaN);
    cpu::permute_rows(r.x.data(), r.send_pos.data(), T, K, H, r.send.data());
    r.block_begin.assign(ep + 1, 0);
    for (int64_t d = 0; d < ep; ++d) {
      const auto first = r.counts.begin() + d * E_local;
      r.block_begin[d + 1] = r.block_begin[d] + std::accumulate(first, first + E_local, int64_t(0));
    }
  }

  for (int64_t d = 0; d < ep; ++d) {
    std::vector<int32_t> counts(ep * E_local);
    std::vector<float> recv;
    for (int64_t s = 0; s < ep; ++s) {
      for (int64_t l = 0; l < E_local; ++l)
        counts[s * E_local + l] = src[s].counts[d * E_local + l];
      recv.insert(recv.end(), src[s].send.begin() + src[s].block_begin[d] * H,
                  src[s].send.begin() + src[s].block_begin[d + 1] * H);
    }
    const int64_t R = int64_t(recv.size()) / H;
    if (d == 2) {
      EXPECT_EQ(R, 0);
    }
    std::vector<float> xe(R * H, kNaN), ye(R * H, kNaN), yr(R * H, kNaN);
    cpu::regroup_rows(recv.data(), counts.data(), ep, E_local, H, 1, true, xe.data());
    int64_t row = 0;
    for (int64_t l = 0; l < E_local; ++l) {
      int64_t n = 0;
      for (int64_t s = 0; s < ep; ++s) n += counts[s * E_local + l];
      for (int64_t j = 0; j < n; ++j, ++row)
        for (int64_t h = 0; h < H; ++h)
          ye[row * H + h] = expert_scale(d * E_local + l) * xe[row * H + h];
    }
    cpu::regroup_rows(ye.data(), counts.data(), ep, E_local, H, 1, false, yr.data());
    // Send each source its block back, into the same rows of its send-order buffer.
    int64_t off = 0;
    for (int64_t s = 0; s < ep; ++s) {
      const int64_t n = src[s].block_begin[d + 1] - src[s].block_begin[d];
      std::copy(yr.begin() + off * H, yr.begin() + (off + n) * H,
                src[s].y_send.begin() + src[s].block_begin[d] * H);
      off += n;
    }
  }

  for (int64_t s = 0; s < ep; ++s) {
    SCOPED_TRACE("source rank " + std::to_string(s));
    const Source& r = src[s];
    const int64_t T = tokens[s];
    std::vector<float> out(T * H, kNaN);
    cpu::unpermute_combine(r.y_send.data(), r.send_pos.data(), r.p.data(), T, K, H, DType::kFp32,
                           out.data());
    std::vector<double> ref(T * H, 0.0), slack(T * H, 0.0);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t h = 0; h < H; ++h) {
          const double term =
              double(r.p[t * K + k]) * expert_scale(r.idx[t * K + k]) * double(r.x[t * H + h]);
          ref[t * H + h] += term;
          slack[t * H + h] += 1e-6 * std::fabs(term);
        }
    expect_close("out", out, ref, 1e-6, slack);
  }
}

}  // namespace
}  // namespace moe
