// The small core pieces: the fsdp x ep mesh, summary statistics, bf16 rounding, and the
// deterministic data generators (hashed_uniform and the init_* functions).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "core/init.h"
#include "core/mesh.h"
#include "core/stats.h"
#include "core/workload.h"

namespace moe {
namespace {

// ---- Mesh --------------------------------------------------------------------------------------

TEST(MeshLayout, WorldOfEightAtEveryShape) {
  const int world = 8;
  const int64_t E = 16;
  const int64_t shapes[][2] = {{8, 1}, {4, 2}, {2, 4}, {1, 8}};
  for (const auto& shape : shapes) {
    const int64_t ep = shape[0], fsdp = shape[1];
    SCOPED_TRACE("ep " + std::to_string(ep) + " fsdp " + std::to_string(fsdp));
    std::vector<int> owner(E, 0);  // how many ranks of fsdp group 0 hold each expert
    for (int rank = 0; rank < world; ++rank) {
      const Mesh m = make_mesh(world, rank, ep, fsdp, E);
      EXPECT_EQ(m.world, world);
      EXPECT_EQ(m.rank, rank);
      EXPECT_EQ(m.ep, ep);
      EXPECT_EQ(m.fsdp, fsdp);
      // EP groups are consecutive ranks: rank = fsdp_rank * ep + ep_rank.
      EXPECT_EQ(m.ep_rank, rank % ep) << "rank " << rank;
      EXPECT_EQ(m.fsdp_rank, rank / ep) << "rank " << rank;
      EXPECT_EQ(m.fsdp_rank * m.ep + m.ep_rank, rank);
      EXPECT_GE(m.ep_rank, 0);
      EXPECT_LT(m.ep_rank, ep);
      EXPECT_GE(m.fsdp_rank, 0);
      EXPECT_LT(m.fsdp_rank, fsdp);
      EXPECT_EQ(m.experts, E);
      EXPECT_EQ(m.experts_per_rank, E / ep);
      EXPECT_EQ(m.experts_begin, m.ep_rank * (E / ep)) << "rank " << rank;
      EXPECT_EQ(m.experts_end, m.experts_begin + E / ep) << "rank " << rank;
      // Expert e lives on EP rank e / (E / ep) (MATH.md).
      for (int64_t e = m.experts_begin; e < m.experts_end; ++e) EXPECT_EQ(e / (E / ep), m.ep_rank);
      if (m.fsdp_rank == 0)
        for (int64_t e = m.experts_begin; e < m.experts_end; ++e) ++owner[e];
    }
    // One EP group covers every expert exactly once.
    for (int64_t e = 0; e < E; ++e) EXPECT_EQ(owner[e], 1) << "expert " << e;
  }
}

TEST(MeshLayout, ExampleRanks) {
  // ep 4 x fsdp 2: rank 6 is the third rank of the second EP group.
  const Mesh m = make_mesh(8, 6, 4, 2, 32);
  EXPECT_EQ(m.ep_rank, 2);
  EXPECT_EQ(m.fsdp_rank, 1);
  EXPECT_EQ(m.experts_begin, 16);
  EXPECT_EQ(m.experts_end, 24);
  // A single rank holds everything.
  const Mesh one = make_mesh(1, 0, 1, 1, 5);
  EXPECT_EQ(one.experts_begin, 0);
  EXPECT_EQ(one.experts_end, 5);
}

TEST(MeshLayout, BadShapesThrow) {
  EXPECT_THROW(make_mesh(8, 0, 4, 4, 16), Error);    // ep * fsdp > world
  EXPECT_THROW(make_mesh(8, 0, 2, 2, 16), Error);    // ep * fsdp < world
  EXPECT_THROW(make_mesh(8, 0, 0, 8, 16), Error);    // ep 0
  EXPECT_THROW(make_mesh(8, 0, 8, 0, 16), Error);    // fsdp 0
  EXPECT_THROW(make_mesh(8, 0, -2, -4, 16), Error);  // negative sizes, positive product
  EXPECT_THROW(make_mesh(8, 0, 8, 1, 12), Error);    // experts not divisible by ep
  EXPECT_THROW(make_mesh(8, 0, 4, 2, 6), Error);     // experts not divisible by ep
  EXPECT_THROW(make_mesh(0, 0, 1, 1, 8), Error);     // empty world
}

TEST(MeshLayout, BadRankOrExpertCountThrows) {
  // A rank outside [0, world) would get ep_rank / fsdp_rank outside the grid.
  EXPECT_THROW(make_mesh(8, 8, 4, 2, 16), Error);
  EXPECT_THROW(make_mesh(8, -1, 4, 2, 16), Error);
  // No experts at all (0 is divisible by every ep).
  EXPECT_THROW(make_mesh(8, 0, 4, 2, 0), Error);
}

// ---- Stats -------------------------------------------------------------------------------------

void expect_summary(const Summary& s, int count, double median, double p10, double p90, double mn,
                    double mx, double mean) {
  EXPECT_EQ(s.count, count);
  EXPECT_NEAR(s.median, median, 1e-12);
  EXPECT_NEAR(s.p10, p10, 1e-12);
  EXPECT_NEAR(s.p90, p90, 1e-12);
  EXPECT_DOUBLE_EQ(s.min, mn);
  EXPECT_DOUBLE_EQ(s.max, mx);
  EXPECT_NEAR(s.mean, mean, 1e-12);
}

TEST(StatsSummary, KnownVectorsLikeNumpy) {
  // numpy.percentile([1..10], [50, 10, 90]) = 5.5, 1.9, 9.1 (given out of order).
  {
    SCOPED_TRACE("1..10");
    expect_summary(summarize({7, 3, 10, 1, 9, 2, 8, 4, 6, 5}), 10, 5.5, 1.9, 9.1, 1, 10, 5.5);
  }
  // sorted -1, 2, 3, 7.5: median at 1.5 -> 2.5, p10 at 0.3 -> -0.1, p90 at 2.7 -> 6.15.
  {
    SCOPED_TRACE("four values");
    expect_summary(summarize({3.0, -1.0, 7.5, 2.0}), 4, 2.5, -0.1, 6.15, -1.0, 7.5, 2.875);
  }
  // Odd count: the median is the middle element; p10 at 0.4 -> 1.4, p90 at 3.6 -> 7.4.
  {
    SCOPED_TRACE("five values");
    expect_summary(summarize({5, 1, 9, 2, 3}), 5, 3, 1.4, 7.4, 1, 9, 4);
  }
  {
    SCOPED_TRACE("two values");
    expect_summary(summarize({10.0, 0.0}), 2, 5.0, 1.0, 9.0, 0.0, 10.0, 5.0);
  }
  {
    SCOPED_TRACE("duplicates");
    expect_summary(summarize({2, 2, 2, 5}), 4, 2, 2, 4.1, 2, 5, 2.75);
  }
}

TEST(StatsSummary, SingleElement) {
  expect_summary(summarize({4.25}), 1, 4.25, 4.25, 4.25, 4.25, 4.25, 4.25);
}

TEST(StatsSummary, Empty) {
  const Summary s = summarize({});
  EXPECT_EQ(s.count, 0);
  EXPECT_EQ(s.median, 0.0);
  EXPECT_EQ(s.min, 0.0);
  EXPECT_EQ(s.max, 0.0);
  EXPECT_EQ(s.mean, 0.0);
}

TEST(StatsSummary, RandomAgainstSortedOrderStatistics) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> d(0.0, 100.0);
  for (int n : {3, 20, 101}) {
    std::vector<double> v(n);
    for (auto& x : v) x = d(rng);
    const Summary s = summarize(v);
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    auto pct = [&](double q) {  // numpy's default ("linear")
      const double pos = q * (n - 1);
      const int lo = int(std::floor(pos));
      const int hi = std::min(lo + 1, n - 1);
      return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
    };
    double mean = 0;
    for (double x : v) mean += x / n;
    SCOPED_TRACE("n " + std::to_string(n));
    expect_summary(s, n, pct(0.5), pct(0.1), pct(0.9), sorted.front(), sorted.back(), mean);
  }
}

// ---- bf16 --------------------------------------------------------------------------------------

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(Bf16Round, HandPickedBitPatterns) {
  struct Case {
    uint32_t in;
    uint16_t out;
    const char* what;
  };
  const Case cases[] = {
      {0x3f800000u, 0x3f80, "1.0 exact"},
      {0x3f807fffu, 0x3f80, "just below half: down"},
      {0x3f808000u, 0x3f80, "exact half, even below: down"},
      {0x3f808001u, 0x3f81, "just above half: up"},
      {0x3f818000u, 0x3f82, "exact half, odd below: up to even"},
      {0xbf808000u, 0xbf80, "negative exact half, even: toward zero"},
      {0xbf818000u, 0xbf82, "negative exact half, odd: away from zero"},
      {0x3fff8000u, 0x4000, "half, odd, carries into the exponent: 2.0"},
      {0x7f7f0000u, 0x7f7f, "max finite bf16 stays"},
      {0x7f7f7fffu, 0x7f7f, "just below half above max finite: max finite"},
      {0x7f7f8000u, 0x7f80, "half above max finite, odd: inf"},
      {0x7f7fffffu, 0x7f80, "max finite float: inf"},
      {0xff7fffffu, 0xff80, "lowest finite float: -inf"},
      {0x7f800000u, 0x7f80, "inf"},
      {0xff800000u, 0xff80, "-inf"},
      {0x00000000u, 0x0000, "zero"},
      {0x80000000u, 0x8000, "negative zero keeps its sign"},
      {0x00000001u, 0x0000, "smallest subnormal: zero"},
      {0x80000001u, 0x8000, "negative smallest subnormal: -0"},
      {0x00008000u, 0x0000, "subnormal half, even: zero"},
      {0x00018000u, 0x0002, "subnormal half, odd: up"},
      {0x00800000u, 0x0080, "smallest normal"},
  };
  for (const Case& c : cases) {
    const uint16_t got = float_to_bf16_bits(from_bits(c.in));
    EXPECT_EQ(got, c.out) << c.what << ": 0x" << std::hex << c.in << " -> 0x" << got;
    EXPECT_EQ(to_bits(round_to_bf16(from_bits(c.in))), uint32_t(c.out) << 16) << c.what;
  }
}

TEST(Bf16Round, NanStaysNan) {
  // Including payloads that a plain "add half and truncate" would turn into inf or wrap to zero.
  const uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0x7f808000u, 0x7fffffffu,
                           0xffffffffu, 0xff800001u, 0x7f80ffffu};
  for (uint32_t n : nans) {
    const float r = round_to_bf16(from_bits(n));
    EXPECT_TRUE(std::isnan(r)) << "0x" << std::hex << n << " -> 0x" << to_bits(r);
    EXPECT_EQ(to_bits(r) >> 31, n >> 31) << "sign of 0x" << std::hex << n;
  }
}

// Round to nearest even by definition: the two neighbouring bf16 values and their distances, in
// double (the value above the largest finite bf16 is 2^128, which rounds to inf).
uint16_t rne_by_definition(float f) {
  const uint32_t u = to_bits(f);
  const uint16_t lo = uint16_t(u >> 16), hi = uint16_t(lo + 1);  // same sign, larger magnitude
  const double mag = std::fabs(double(f));
  const double lo_mag = std::fabs(double(bf16_bits_to_float(lo)));
  const double hi_mag =
      (hi & 0x7fff) == 0x7f80 ? std::ldexp(1.0, 128) : std::fabs(double(bf16_bits_to_float(hi)));
  const double dl = mag - lo_mag, dh = hi_mag - mag;
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) ? hi : lo;
}

TEST(Bf16Round, RandomFiniteBitPatternsMatchDefinition) {
  std::mt19937_64 rng(7);
  std::ostringstream os;
  int bad = 0;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = uint32_t(rng());
    if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u;  // many exact halfway cases
    const float f = from_bits(u);
    if (!std::isfinite(f)) continue;
    const uint16_t got = float_to_bf16_bits(f), want = rne_by_definition(f);
    if (got == want) continue;
    if (bad++ < 8)
      os << "\n  0x" << std::hex << u << " got 0x" << got << " want 0x" << want << std::dec;
  }
  EXPECT_EQ(bad, 0) << bad << " mismatches" << os.str();
}

// ---- Init --------------------------------------------------------------------------------------

Workload small_workload(DType dtype) {
  Workload w;
  w.model = ModelShape{16, 12, 8, 2};  // H, F, E, K
  w.tokens_per_rank = 10;
  w.dtype = dtype;
  w.seed = 1234;
  return w;
}

void mean_std(const std::vector<float>& v, double& mean, double& std_dev) {
  double s = 0, s2 = 0;
  for (float x : v) {
    s += x;
    s2 += double(x) * x;
  }
  mean = s / double(v.size());
  std_dev = std::sqrt(s2 / double(v.size()) - mean * mean);
}

TEST(InitHashedUniform, RangeMeanAndStd) {
  const int n = 100000;
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = hashed_uniform(1234, 7, uint64_t(i));
  for (int i = 0; i < n; ++i) {
    ASSERT_GE(v[i], -1.0f) << "draw " << i;
    ASSERT_LT(v[i], 1.0f) << "draw " << i;
  }
  double mean, std_dev;
  mean_std(v, mean, std_dev);
  // Standard error of the mean: 0.577 / sqrt(1e5) = 0.0018.
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std_dev, 1.0 / std::sqrt(3.0), 0.005);
  // Pure function of its arguments; seed, stream and index all matter.
  EXPECT_EQ(hashed_uniform(1234, 7, 42), v[42]);
  EXPECT_NE(hashed_uniform(1235, 7, 42), v[42]);
  EXPECT_NE(hashed_uniform(1234, 8, 42), v[42]);
  EXPECT_NE(hashed_uniform(1234, 7, 43), v[42]);
}

TEST(InitHashedUniform, NoStructureAcrossStreamsAndSeeds) {
  // The same index in neighbouring streams or seeds is uncorrelated.
  const int n = 20000;
  double c_stream = 0, c_seed = 0;
  for (int i = 0; i < n; ++i) {
    const double a = hashed_uniform(1, 5, i);
    c_stream += a * hashed_uniform(1, 6, i);
    c_seed += a * hashed_uniform(2, 5, i);
  }
  // Each sum / n has std (1/3) / sqrt(n) = 0.0024.
  EXPECT_NEAR(c_stream / n, 0.0, 0.015);
  EXPECT_NEAR(c_seed / n, 0.0, 0.015);
}

void check_range_is_slice(const Workload& w, int64_t total,
                          void (*init)(const Workload&, int64_t, int64_t, float*)) {
  std::vector<float> full(total);
  init(w, 0, total, full.data());
  // Any sub-range, and a split into uneven FSDP-like shards, reproduce the full tensor.
  const int64_t begin = total / 3 + 1, end = total - total / 5;
  std::vector<float> part(end - begin);
  init(w, begin, end, part.data());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), full.begin() + begin));
  std::vector<float> shards(total);
  const int64_t cuts[] = {0, 7, total / 2, total / 2, total - 1, total};
  for (int i = 0; i + 1 < 6; ++i) init(w, cuts[i], cuts[i + 1], shards.data() + cuts[i]);
  EXPECT_TRUE(std::equal(shards.begin(), shards.end(), full.begin()));
}

TEST(InitWeights, RangeIsASliceOfTheFullTensor) {
  for (DType dtype : {DType::kFp32, DType::kBf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Workload w = small_workload(dtype);
    const int64_t H = w.model.hidden, F = w.model.ffn, E = w.model.experts;
    check_range_is_slice(w, E * H * 2 * F, init_w_in_range);
    check_range_is_slice(w, E * F * H, init_w_out_range);
  }
}

TEST(InitWeights, ScaleAndIndependenceFromTokens) {
  Workload w = small_workload(DType::kFp32);
  w.model = ModelShape{256, 128, 8, 2};
  const int64_t H = w.model.hidden, F = w.model.ffn, E = w.model.experts;
  std::vector<float> w_in(E * H * 2 * F), w_out(E * F * H), w_gate(H * E);
  init_w_in_range(w, 0, int64_t(w_in.size()), w_in.data());
  init_w_out_range(w, 0, int64_t(w_out.size()), w_out.data());
  init_w_gate(w, w_gate.data());
  double mean, std_dev;
  mean_std(w_in, mean, std_dev);
  EXPECT_NEAR(std_dev, 1.0 / std::sqrt(double(H)), 0.01 / std::sqrt(double(H)));
  mean_std(w_out, mean, std_dev);
  EXPECT_NEAR(std_dev, 1.0 / std::sqrt(double(F)), 0.01 / std::sqrt(double(F)));
  mean_std(w_gate, mean, std_dev);
  EXPECT_NEAR(std_dev, 1.0 / std::sqrt(double(H)), 0.05 / std::sqrt(double(H)));
  // The weights do not depend on the token count (nor, by construction, on the mesh).
  Workload w2 = w;
  w2.tokens_per_rank = 999;
  std::vector<float> w_in2(w_in.size());
  init_w_in_range(w2, 0, int64_t(w_in2.size()), w_in2.data());
  EXPECT_EQ(w_in, w_in2);
}

TEST(InitTokens, DifferAcrossRanksAndStepsAndRepeat) {
  const Workload w = small_workload(DType::kBf16);
  const int64_t n = w.tokens_per_rank * w.model.hidden;
  auto x = [&](int rank, int64_t step) {
    std::vector<float> v(n);
    init_x(w, rank, step, v.data());
    return v;
  };
  auto dout = [&](int rank, int64_t step) {
    std::vector<float> v(n);
    init_dout(w, rank, step, v.data());
    return v;
  };
  auto fraction_equal = [&](const std::vector<float>& a, const std::vector<float>& b) {
    int64_t same = 0;
    for (int64_t i = 0; i < n; ++i) same += a[i] == b[i];
    return double(same) / double(n);
  };
  const std::vector<float> base = x(0, 0);
  EXPECT_EQ(x(0, 0), base);  // deterministic
  // bf16 values in [-1.7, 1.7) collide now and then; mostly they must differ.
  EXPECT_LT(fraction_equal(x(1, 0), base), 0.05) << "rank 1 vs rank 0";
  EXPECT_LT(fraction_equal(x(7, 0), base), 0.05) << "rank 7 vs rank 0";
  EXPECT_LT(fraction_equal(x(0, 1), base), 0.05) << "step 1 vs step 0";
  EXPECT_LT(fraction_equal(x(1, 1), x(0, 1)), 0.05) << "rank 1 vs rank 0 at step 1";
  EXPECT_LT(fraction_equal(x(0, 256), base), 0.05) << "step 256 vs step 0";
  EXPECT_LT(fraction_equal(dout(0, 0), base), 0.05) << "dout vs x";
  EXPECT_LT(fraction_equal(dout(1, 0), dout(0, 0)), 0.05) << "dout rank 1 vs rank 0";
  EXPECT_LT(fraction_equal(dout(0, 1), dout(0, 0)), 0.05) << "dout step 1 vs step 0";
}

TEST(InitTokens, UnitStd) {
  Workload w = small_workload(DType::kFp32);
  w.tokens_per_rank = 1000;
  w.model.hidden = 64;
  std::vector<float> x(w.tokens_per_rank * w.model.hidden);
  init_x(w, 3, 5, x.data());
  double mean, std_dev;
  mean_std(x, mean, std_dev);
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(std_dev, 1.0, 0.01);
}

int64_t count_not_bf16(const std::vector<float>& v) {
  int64_t n = 0;
  for (float x : v) n += round_to_bf16(x) != x;
  return n;
}

TEST(InitDtype, Bf16WorkloadsGiveBf16Values) {
  for (DType dtype : {DType::kBf16, DType::kFp32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Workload w = small_workload(dtype);
    const int64_t H = w.model.hidden, F = w.model.ffn, E = w.model.experts;
    const int64_t T = w.tokens_per_rank;
    std::vector<float> w_gate(H * E), w_in(E * H * 2 * F), w_out(E * F * H), x(T * H), d(T * H);
    init_w_gate(w, w_gate.data());
    init_w_in_range(w, 0, int64_t(w_in.size()), w_in.data());
    init_w_out_range(w, 0, int64_t(w_out.size()), w_out.data());
    init_x(w, 2, 3, x.data());
    init_dout(w, 2, 3, d.data());
    if (dtype == DType::kBf16) {
      EXPECT_EQ(count_not_bf16(w_gate), 0) << "w_gate";
      EXPECT_EQ(count_not_bf16(w_in), 0) << "w_in";
      EXPECT_EQ(count_not_bf16(w_out), 0) << "w_out";
      EXPECT_EQ(count_not_bf16(x), 0) << "x";
      EXPECT_EQ(count_not_bf16(d), 0) << "dout";
    } else {
      // fp32 keeps the full precision (almost no value happens to be a bf16).
      EXPECT_GT(count_not_bf16(w_in), int64_t(w_in.size()) * 9 / 10) << "w_in";
      EXPECT_GT(count_not_bf16(x), int64_t(x.size()) * 9 / 10) << "x";
    }
  }
}

TEST(InitDtype, ExpertBiasIsFp32InRange) {
  const Workload w = small_workload(DType::kBf16);
  std::vector<float> bias(w.model.experts);
  init_expert_bias(w, bias.data());
  for (float b : bias) {
    EXPECT_GE(b, -0.1f);
    EXPECT_LT(b, 0.1f);
  }
  EXPECT_GT(*std::max_element(bias.begin(), bias.end()),
            *std::min_element(bias.begin(), bias.end()));
}

TEST(StatsDrift, ThirdsInOrderAndTheirSpread) {
  // 10 samples: thirds [0, 3), [3, 6), [6, 10).
  const Drift d = drift_by_thirds({27, 28, 27.5, 33, 32, 35, 31, 30, 29, 28.5});
  ASSERT_EQ(d.thirds.size(), 3u);
  EXPECT_DOUBLE_EQ(d.thirds[0], 27.5);
  EXPECT_DOUBLE_EQ(d.thirds[1], 33);
  EXPECT_DOUBLE_EQ(d.thirds[2], 29.5);
  EXPECT_DOUBLE_EQ(d.spread, 33 / 27.5 - 1);
  // Noisy but steady: each third's median is 30.
  const Drift flat = drift_by_thirds({27, 33, 30, 28, 32, 30, 29, 31, 30});
  EXPECT_DOUBLE_EQ(flat.spread, 0);
}

TEST(StatsDrift, TooFewOrNonPositiveSamplesGiveNone) {
  EXPECT_TRUE(drift_by_thirds({1, 2, 3, 4, 5, 6, 7, 8}).thirds.empty());
  EXPECT_EQ(drift_by_thirds({}).spread, 0);
  const Drift zeros = drift_by_thirds(std::vector<double>(9, 0.0));
  EXPECT_TRUE(zeros.thirds.empty());
  EXPECT_EQ(zeros.spread, 0);
}

}  // namespace
}  // namespace moe
