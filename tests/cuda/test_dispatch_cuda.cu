// The CUDA dispatch kernels (kernels/cuda/layout.h, permute.h, combine.h, expert_ffn.h) against
// their CPU twins (kernels/cpu/ layout.h, permute.h, combine.h and the SwiGLU of expert_ffn.h) on
// identical seeded inputs, already rounded to the storage dtype: layouts and moved rows exact; sums
// equal up to one bf16 ulp on a handful of elements (the GPU contracts a*b + c into an FMA) or
// within 1e-6 in fp32; the storage conversions bit for bit against core/bf16.h; the layout ->
// permute -> combine chain bitwise repeatable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/init.h"
#include "core/layout.h"
#include "core/router_scratch.h"
#include "kernels/cpu/combine.h"
#include "kernels/cpu/expert_ffn.h"
#include "kernels/cpu/layout.h"
#include "kernels/cpu/permute.h"
#include "kernels/cuda/combine.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/expert_ffn.h"
#include "kernels/cuda/layout.h"
#include "kernels/cuda/permute.h"
#include "tests/cuda/cuda_test_util.h"

namespace moe::test {
namespace {

const DType kDTypes[] = {DType::kBf16, DType::kFp32};

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
};

// Uniform in [lo, hi), rounded to `dtype` so both sides see exactly the same values.
std::vector<float> random_values(int64_t n, DType dtype, float lo, float hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dtype == DType::kBf16 ? round_to_bf16(dist(rng)) : dist(rng);
  return v;
}

// Top-K routing [T, K]: K distinct experts per token, drawn from `experts`.
std::vector<int32_t> random_routing(int64_t T, int64_t K, const std::vector<int32_t>& experts,
                                    uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> idx(T * K), pool = experts;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      std::uniform_int_distribution<size_t> pick(size_t(k), pool.size() - 1);
      std::swap(pool[k], pool[pick(rng)]);
      idx[t * K + k] = pool[k];
    }
  return idx;
}

// v's rows of `width` followed by NaN rows up to `rows` rows.
std::vector<float> padded_rows(std::vector<float> v, int64_t width, int64_t rows) {
  v.resize(size_t(rows * width), NAN);
  return v;
}

std::vector<int32_t> first_experts(int32_t E) {
  std::vector<int32_t> e(E);
  std::iota(e.begin(), e.end(), 0);
  return e;
}

struct Layout {
  std::vector<int32_t> counts, send_pos;
};

Layout cpu_layout(const std::vector<int32_t>& idx, int64_t T, int64_t K, int64_t E) {
  Layout l{std::vector<int32_t>(E), std::vector<int32_t>(T * K)};
  cpu::dispatch_layout(idx.data(), nullptr, T, K, E, 0, false, l.counts.data(), l.send_pos.data());
  return l;
}

std::string show(int32_t v) { return std::to_string(v); }
std::string show(uint16_t v) { return std::to_string(v); }
std::string show(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", double(v));
  return b;
}

// Bitwise equality; prints the first differences.
template <class T>
void expect_identical(const std::vector<T>& got, const std::vector<T>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) == 0) continue;
    if (bad < 5) {
      std::printf("  %s[%zu]: got %s want %s\n", what.c_str(), i, show(got[i]).c_str(),
                  show(want[i]).c_str());
    }
    ++bad;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " differ";
}

// Position of a bf16 value on the number line in ulps (+0 and -0 both at 0).
int32_t bf16_order(float v) {
  const uint16_t b = float_to_bf16_bits(v);
  return (b & 0x8000) ? -int32_t(b & 0x7fff) : int32_t(b);
}

// A storage tensor against the CPU twin's. fp32: within 1e-6 of max(1, |want|). bf16: at most
// max_one_ulp elements differ, each by one ulp (or by no more than abs_floor, the fp32 rounding
// noise of a sum that cancels to near zero), none by more.
void expect_storage_close(const std::vector<float>& got, const std::vector<float>& want,
                          DType dtype, int64_t max_one_ulp, double abs_floor,
                          const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (dtype == DType::kFp32) {
    EXPECT_EQ(count_mismatches(got, want, 1e-6, what.c_str()), 0) << what;
    return;
  }
  int64_t one_ulp = 0, more = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) == 0) continue;
    const int32_t ulps = std::abs(bf16_order(got[i]) - bf16_order(want[i]));
    const bool near = ulps <= 1 || std::fabs(double(got[i]) - want[i]) <= abs_floor;
    if (one_ulp + more < 5) {
      std::printf("  %s[%zu]: got %.9g want %.9g (%d bf16 ulps)\n", what.c_str(), i, double(got[i]),
                  double(want[i]), ulps);
    }
    if (near) {
      ++one_ulp;
    } else {
      ++more;
    }
  }
  EXPECT_EQ(more, 0) << what << ": " << more << " of " << got.size() << " beyond one bf16 ulp";
  EXPECT_LE(one_ulp, max_one_ulp) << what << ": " << one_ulp << " of " << got.size()
                                  << " one bf16 ulp off";
}

// A tensor shifted by `offset` elements past cudaMalloc's alignment (the 16-byte path is off).
void* at(const StorageBuf& b, int64_t offset) {
  return static_cast<char*>(b.ptr) + offset * (b.dtype == DType::kBf16 ? 2 : 4);
}
std::vector<float> host_from(const StorageBuf& b, int64_t offset) {
  std::vector<float> v = b.host();
  v.erase(v.begin(), v.begin() + offset);
  return v;
}
std::vector<float> padded(const std::vector<float>& v, int64_t offset) {
  std::vector<float> p(size_t(offset), 0.0f);
  p.insert(p.end(), v.begin(), v.end());
  return p;
}

// ---- dispatch_layout ----

struct LayoutCase {
  std::string name;
  int64_t T, K, E;
  std::vector<int32_t> idx;
};

TEST(DispatchCudaLayout, MatchesCpu) {
  MOE_REQUIRE_GPU();
  Stream stream;
  std::vector<LayoutCase> cases;
  cases.push_back(
      {"random T=1000 K=8 E=256", 1000, 8, 256, random_routing(1000, 8, first_experts(256), 11)});
  cases.push_back({"random T=37 K=2 E=8", 37, 2, 8, random_routing(37, 2, first_experts(8), 12)});
  // K == E and T*K exactly one scan tile (256): every expert gets every token.
  cases.push_back({"K=E=4 T=64", 64, 4, 4, random_routing(64, 4, first_experts(4), 13)});
  LayoutCase first{"every token to experts 0..K-1, E=16", 300, 4, 16, {}};
  for (int64_t t = 0; t < first.T; ++t)
    for (int32_t k = 0; k < first.K; ++k) first.idx.push_back(k);
  cases.push_back(first);
  // 4 of 64 experts used (neither the first nor the last): 60 experts get nothing.
  cases.push_back(
      {"experts {5,6,30,41} of 64", 200, 3, 64, random_routing(200, 3, {5, 6, 30, 41}, 14)});
  // For the range kernels: many ranges, the last one partial, a 32-row step with every lane on
  // one expert (two hot experts), fewer rows than a warp, many experts (E = 600), and more
  // experts than their shared memory counts (the block per expert kernels then).
  cases.push_back(
      {"random T=4099 K=8 E=128", 4099, 8, 128, random_routing(4099, 8, first_experts(128), 15)});
  cases.push_back(
      {"hot experts {3,9} of 32, T=1500 K=2", 1500, 2, 32, random_routing(1500, 2, {3, 9}, 16)});
  cases.push_back({"T=3 K=5 E=5", 3, 5, 5, random_routing(3, 5, first_experts(5), 17)});
  cases.push_back(
      {"random T=700 K=6 E=600", 700, 6, 600, random_routing(700, 6, first_experts(600), 18)});
  cases.push_back(
      {"random T=100 K=4 E=2000", 100, 4, 2000, random_routing(100, 4, first_experts(2000), 19)});
  for (const LayoutCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Layout want = cpu_layout(c.idx, c.T, c.K, c.E);
    DevBuf<int32_t> idx(c.idx);
    // With scratch (garbage to start: the kernels must not depend on it), the range kernels;
    // without, a block per expert.
    DevBuf<int32_t> scratch(
        std::vector<int32_t>(dispatch_layout_scratch_bytes(c.T, c.K, c.E) / sizeof(int32_t), -7));
    for (int32_t* s : {scratch.ptr, static_cast<int32_t*>(nullptr)}) {
      const std::string what = c.name + (s ? " (ranges)" : " (block per expert)");
      DevBuf<int32_t> counts(std::vector<int32_t>(c.E, -1));
      DevBuf<int32_t> send_pos(std::vector<int32_t>(c.T * c.K, -1));
      cuda::dispatch_layout(idx.ptr, nullptr, c.T, c.K, c.E, 0, false, counts.ptr, send_pos.ptr, s,
                            stream.s);
      expect_identical(counts.host(), want.counts, what + " expert_counts");
      expect_identical(send_pos.host(), want.send_pos, what + " send_pos");
    }
  }
}

// ---- dispatch_layout with a capacity ----

Layout cpu_layout_capacity(const std::vector<int32_t>& idx, const std::vector<float>& p, int64_t T,
                           int64_t K, int64_t E, int64_t capacity, bool by_position) {
  Layout l{std::vector<int32_t>(E), std::vector<int32_t>(T * K)};
  cpu::dispatch_layout(idx.data(), p.data(), T, K, E, capacity, by_position, l.counts.data(),
                       l.send_pos.data());
  return l;
}

struct CapacityCase {
  std::string name;
  int64_t T, K, E;
  std::vector<int32_t> idx;
  std::vector<float> p;
};

// p with exact ties: `levels` distinct values in [0, 1) (levels 0: continuous).
std::vector<float> tied_weights(int64_t n, int levels, uint64_t seed) {
  std::vector<float> p = random_values(n, DType::kFp32, 0.0f, 1.0f, seed);
  if (levels > 0)
    for (float& v : p) v = std::floor(v * float(levels)) / float(levels);
  return p;
}

std::vector<CapacityCase> capacity_cases() {
  std::vector<CapacityCase> cases;
  auto add = [&](std::string name, int64_t T, int64_t K, int64_t E, std::vector<int32_t> idx,
                 std::vector<float> p) {
    cases.push_back({std::move(name), T, K, E, std::move(idx), std::move(p)});
  };
  add("T=4096 K=8 E=256", 4096, 8, 256, random_routing(4096, 8, first_experts(256), 31),
      tied_weights(4096 * 8, 0, 32));
  add("T=4096 K=8 E=256, 4 levels of p", 4096, 8, 256,
      random_routing(4096, 8, first_experts(256), 33), tied_weights(4096 * 8, 4, 34));
  add("T=37 K=2 E=8", 37, 2, 8, random_routing(37, 2, first_experts(8), 35),
      tied_weights(37 * 2, 0, 36));
  add("T=1000 K=6 E=64, all p equal", 1000, 6, 64, random_routing(1000, 6, first_experts(64), 37),
      std::vector<float>(1000 * 6, 0.125f));
  // 60 of 64 experts get nothing; the 4 used get about 150 rows each.
  add("experts {5,6,30,41} of 64, 3 levels", 200, 3, 64, random_routing(200, 3, {5, 6, 30, 41}, 38),
      tied_weights(200 * 3, 3, 39));
  {
    // Every token to experts 0..K-1: segments of T rows, many scan tiles each.
    CapacityCase c{"every token to experts 0..7 of 256, T=4096, 16 levels", 4096, 8, 256, {}, {}};
    for (int64_t t = 0; t < c.T; ++t)
      for (int32_t k = 0; k < c.K; ++k) c.idx.push_back(k);
    c.p = tied_weights(c.T * c.K, 16, 40);
    cases.push_back(c);
  }
  // One expert takes every row (capacity n - 1 drops exactly one).
  add("every row to expert 3 of 8, T=300 K=1", 300, 1, 8, std::vector<int32_t>(300, 3),
      tied_weights(300, 5, 47));
  // T*K = 32768 rows on 4 experts (about 8192 each), K = 1.
  add("T=32768 K=1 E=4, 1000 levels", 32768, 1, 4, random_routing(32768, 1, first_experts(4), 41),
      tied_weights(32768, 1000, 42));
  {
    // Signed zeros (equal in fp32), negatives, infinities and subnormals: the order is the fp32
    // comparison's, not the bit patterns'.
    CapacityCase c{
        "special p, T=512 K=2 E=4", 512, 2, 4, random_routing(512, 2, first_experts(4), 43), {}};
    const float special[] = {0.0f,      -0.0f,  1.0f,    -1.0f,           INFINITY,
                             -INFINITY, 1e-45f, -1e-45f, 1.17549435e-38f, -1.17549435e-38f,
                             0.5f,      -0.5f};
    std::mt19937_64 rng(44);
    for (int64_t i = 0; i < c.T * c.K; ++i) c.p.push_back(special[rng() % 12]);
    cases.push_back(c);
  }
  return cases;
}

TEST(DispatchCudaLayout, CapacityMatchesCpu) {
  MOE_REQUIRE_GPU();
  Stream stream;
  for (const CapacityCase& c : capacity_cases()) {
    const int64_t n = c.T * c.K;
    const int64_t balanced = (n + c.E - 1) / c.E;
    // 1; below, at and above the balanced load; n - 1 (drops only where one expert has every
    // row); n and more (nothing dropped).
    const int64_t capacities[] = {
        1, std::max<int64_t>(1, balanced / 2), balanced, balanced + 3, n - 1, n, int64_t(1) << 40};
    DevBuf<int32_t> idx(c.idx);
    DevBuf<float> p(c.p);
    // Scratch starts as garbage: the kernels must not depend on it.
    DevBuf<int32_t> scratch(
        std::vector<int32_t>(dispatch_layout_scratch_bytes(c.T, c.K, c.E) / sizeof(int32_t), -7));
    for (int64_t capacity : capacities)
      for (bool by_position : {true, false}) {
        const std::string what = c.name + " capacity=" + std::to_string(capacity) +
                                 (by_position ? " by position" : " by probability");
        SCOPED_TRACE(what);
        const Layout want = cpu_layout_capacity(c.idx, c.p, c.T, c.K, c.E, capacity, by_position);
        DevBuf<int32_t> counts(std::vector<int32_t>(c.E, -5));
        DevBuf<int32_t> send_pos(std::vector<int32_t>(n, -5));
        cuda::dispatch_layout(idx.ptr, p.ptr, c.T, c.K, c.E, capacity, by_position, counts.ptr,
                              send_pos.ptr, scratch.ptr, stream.s);
        expect_identical(counts.host(), want.counts, what + " expert_counts");
        expect_identical(send_pos.host(), want.send_pos, what + " send_pos");
        // The CPU twin itself: every expert keeps min(rows, capacity).
        std::vector<int64_t> rows(c.E, 0);
        for (int32_t e : c.idx) ++rows[e];
        for (int64_t e = 0; e < c.E; ++e)
          ASSERT_EQ(want.counts[e], std::min(rows[e], capacity)) << what << " expert " << e;
      }
  }
}

// Position drops need neither p nor scratch; probability drops run twice bitwise the same.
TEST(DispatchCudaLayout, CapacityByPositionWithoutPAndRepeatable) {
  MOE_REQUIRE_GPU();
  Stream stream;
  const int64_t T = 777, K = 4, E = 32, capacity = 60;
  const std::vector<int32_t> h_idx = random_routing(T, K, first_experts(int32_t(E)), 45);
  const std::vector<float> h_p = tied_weights(T * K, 8, 46);
  DevBuf<int32_t> idx(h_idx);
  DevBuf<float> p(h_p);
  const Layout want = cpu_layout_capacity(h_idx, h_p, T, K, E, capacity, true);
  DevBuf<int32_t> counts(E), send_pos(T * K);
  cuda::dispatch_layout(idx.ptr, nullptr, T, K, E, capacity, true, counts.ptr, send_pos.ptr,
                        nullptr, stream.s);
  expect_identical(counts.host(), want.counts, "by position expert_counts");
  expect_identical(send_pos.host(), want.send_pos, "by position send_pos");

  DevBuf<int32_t> scratch(dispatch_layout_scratch_bytes(T, K, E) / sizeof(int32_t));
  std::vector<int32_t> first;
  for (int run = 0; run < 2; ++run) {
    cuda::dispatch_layout(idx.ptr, p.ptr, T, K, E, capacity, false, counts.ptr, send_pos.ptr,
                          scratch.ptr, stream.s);
    std::vector<int32_t> got = send_pos.host();
    if (run == 0)
      first = got;
    else
      expect_identical(got, first, "by probability, second run");
  }
}

// ---- permute_rows ----

TEST(DispatchCudaPermute, RowsMatchCpu) {
  MOE_REQUIRE_GPU();
  Stream stream;
  const int64_t T = 53, K = 4, E = 16;
  const Layout layout = cpu_layout(random_routing(T, K, first_experts(int32_t(E)), 21), T, K, E);
  DevBuf<int32_t> send_pos(layout.send_pos);
  struct Width {
    int64_t H, offset;
  };
  // 256 and 8: 16-byte rows in both dtypes; 100 and 300: bf16 rows of 8 mod 16 bytes (element
  // loop, 300 > 128 threads); 3: the element loop in fp32 too; offset 1: unaligned pointers.
  const Width widths[] = {{256, 0}, {100, 0}, {8, 0}, {300, 0}, {3, 0}, {256, 1}};
  uint64_t seed = 200;
  for (DType dtype : kDTypes)
    for (Width w : widths) {
      const std::string what = std::string(dtype_name(dtype)) + " H=" + std::to_string(w.H) +
                               " offset=" + std::to_string(w.offset);
      SCOPED_TRACE(what);
      const std::vector<float> x = random_values(T * w.H, dtype, -1.0f, 1.0f, seed++);
      std::vector<float> want(T * K * w.H);
      cpu::permute_rows(x.data(), layout.send_pos.data(), T, K, w.H, want.data());
      StorageBuf src(dtype, padded(x, w.offset));
      StorageBuf dst(dtype, padded(std::vector<float>(T * K * w.H, NAN), w.offset));
      cuda::permute_rows(at(src, w.offset), send_pos.ptr, T, K, w.H, dtype, at(dst, w.offset),
                         stream.s);
      expect_identical(host_from(dst, w.offset), want, what);
    }
}

// ---- regroup_rows ----

// counts [ep, E_local]: 0 = random in 0..6, about 45% zeros; 1 = the same with source rank
// ep/2 sending nothing (with ep = 1, nothing at all); 2 = all zeros.
std::vector<int32_t> regroup_counts(int pattern, int64_t ep, int64_t El, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(-4, 6);
  std::vector<int32_t> c(ep * El, 0);
  if (pattern == 2) return c;
  for (int32_t& v : c) v = std::max(0, dist(rng));
  if (pattern == 1)
    for (int64_t l = 0; l < El; ++l) c[(ep / 2) * El + l] = 0;
  return c;
}

TEST(DispatchCudaRegroup, BothDirectionsMatchCpu) {
  MOE_REQUIRE_GPU();
  Stream stream;
  const char* pattern_names[] = {"random with zeros", "silent source rank", "all zero"};
  uint64_t seed = 300;
  for (DType dtype : kDTypes)
    for (int64_t ep : {1, 2, 4, 8})
      for (int64_t El : {1, 3, 32})
        for (int pattern = 0; pattern < 3; ++pattern)
          for (int64_t H : {40, 5}) {
            const std::vector<int32_t> counts = regroup_counts(pattern, ep, El, seed++);
            const int64_t rows = std::accumulate(counts.begin(), counts.end(), int64_t(0));
            // src and dst hold one spare row past `rows`: dst's must stay NaN.
            const std::vector<float> x = random_values((rows + 1) * H, dtype, -1.0f, 1.0f, seed++);
            DevBuf<int32_t> d_counts(counts);
            DevBuf<int64_t> block_offsets(2 * ep * El);
            StorageBuf src(dtype, x);
            for (bool to_expert_major : {true, false}) {
              const std::string what =
                  std::string(dtype_name(dtype)) + " ep=" + std::to_string(ep) +
                  " E_local=" + std::to_string(El) + " " + pattern_names[pattern] +
                  " H=" + std::to_string(H) + " rows=" + std::to_string(rows) +
                  (to_expert_major ? " to expert-major" : " to rank-major");
              SCOPED_TRACE(what);
              std::vector<float> want((rows + 1) * H, NAN);
              cpu::regroup_rows(x.data(), counts.data(), ep, El, H, 1, to_expert_major,
                                want.data());
              StorageBuf dst(dtype, std::vector<float>((rows + 1) * H, NAN));
              // A bound past the rows: the kernel must stop at the counts' sum.
              cuda::regroup_rows(src.ptr, d_counts.ptr, ep, El, H, 1, rows + 1, to_expert_major,
                                 dtype, block_offsets.ptr, dst.ptr, stream.s);
              CUDA_CHECK(cudaStreamSynchronize(stream.s));
              expect_identical(dst.host(), want, what);
            }
          }
}

// ---- expert_offsets ----

// The device offsets the sync-free step's GEMMs read, against core/layout.h's: a slice of wider
// rows (stride > E_local, the all-gather's [ep, E] counts) and the regroup's own (stride
// E_local), with zeros and padding.
TEST(DispatchCudaExpertOffsets, MatchTheHostLayout) {
  MOE_REQUIRE_GPU();
  Stream stream;
  uint64_t seed = 390;
  for (int64_t ep : {1, 2, 8})
    for (int64_t El : {1, 3, 256})
      for (int64_t extra : {0, 5})
        for (int64_t align : {1, 16, 128}) {
          const int64_t stride = El + extra;
          const std::string what = "ep=" + std::to_string(ep) + " E_local=" + std::to_string(El) +
                                   " stride=" + std::to_string(stride) +
                                   " align=" + std::to_string(align);
          SCOPED_TRACE(what);
          const std::vector<int32_t> counts = regroup_counts(0, ep, stride, seed++);
          std::vector<int64_t> want(El + 1);
          expert_major_offsets_strided(counts.data(), ep, stride, El, align, want.data());
          DevBuf<int32_t> d_counts(counts);
          DevBuf<int64_t> got(std::vector<int64_t>(El + 1, -7));
          cuda::expert_offsets(d_counts.ptr, ep, stride, El, align, got.ptr, stream.s);
          CUDA_CHECK(cudaStreamSynchronize(stream.s));
          EXPECT_EQ(got.host(), want) << what;
        }
}

// The routed rows' slots under a placement (core/placement.h) on the device against the twin's,
// for a random permutation of the experts and random routings.
TEST(DispatchCudaExpertsToSlots, MatchesCpu) {
  MOE_REQUIRE_GPU();
  Stream stream;
  uint64_t seed = 391;
  for (int32_t E : {2, 8, 256})
    for (int64_t T : {1, 37, 4096}) {
      const int64_t K = std::min<int64_t>(E, 8);
      SCOPED_TRACE("E=" + std::to_string(E) + " T=" + std::to_string(T));
      std::vector<int32_t> slot_of = first_experts(E);
      std::shuffle(slot_of.begin(), slot_of.end(), std::mt19937_64(seed++));
      const std::vector<int32_t> idx = random_routing(T, K, first_experts(E), seed++);
      std::vector<int32_t> want(size_t(T * K));
      cpu::experts_to_slots(idx.data(), T * K, slot_of.data(), want.data());
      DevBuf<int32_t> d_idx(idx), d_slot_of(slot_of), got(std::vector<int32_t>(T * K, -7));
      cuda::experts_to_slots(d_idx.ptr, T * K, d_slot_of.ptr, got.ptr, stream.s);
      CUDA_CHECK(cudaStreamSynchronize(stream.s));
      EXPECT_EQ(got.host(), want);
    }
}

// The dispatchers' block table on the device against core/layout.h's, and the padding rows it
// gives zeroed where the CPU twin zeroes them (every other row left as it was).
TEST(DispatchCudaExpertBlocks, TableAndPaddingMatchTheCpu) {
  MOE_REQUIRE_GPU();
  Stream stream;
  uint64_t seed = 395;
  // 300 experts: more than one block-wide scan tile (kThreads 256) of the kernel.
  for (int64_t ep : {1, 2, 8})
    for (int64_t El : {1, 3, 32, 300})
      for (int64_t first_experts : {0, 2})
        for (int64_t align : {1, 16}) {
          const int64_t first = first_experts * El, stride = first + El + 3, H = 24;
          const std::string what = "ep=" + std::to_string(ep) + " E_local=" + std::to_string(El) +
                                   " first=" + std::to_string(first) +
                                   " align=" + std::to_string(align);
          SCOPED_TRACE(what);
          const std::vector<int32_t> counts = regroup_counts(0, ep, stride, seed++);
          const int64_t n = expert_block_table_entries(ep, El);
          std::vector<int32_t> want(n);
          std::vector<int64_t> want_offsets(El + 1);
          expert_block_table(counts.data(), ep, stride, first, El, align, want.data(),
                             want_offsets.data());
          DevBuf<int32_t> d_counts(counts), table(std::vector<int32_t>(n, -7));
          DevBuf<int64_t> offsets(std::vector<int64_t>(El + 1, -7));
          cuda::expert_blocks(d_counts.ptr, ep, stride, first, El, align, table.ptr, offsets.ptr,
                              stream.s);
          CUDA_CHECK(cudaStreamSynchronize(stream.s));
          EXPECT_EQ(table.host(), want) << what;
          EXPECT_EQ(offsets.host(), want_offsets) << what;
          const int64_t R = want_offsets[El];
          std::vector<float> rows = random_values(R * H, DType::kFp32, 1.0f, 2.0f, seed++);
          std::vector<float> want_rows = rows;
          const int32_t* expert_rows = want.data() + ep * (2 * El + 1);
          cpu::zero_expert_padding(expert_rows, want_offsets.data(), El, H, want_rows.data());
          for (DType dtype : kDTypes) {
            StorageBuf got(dtype, rows);
            cuda::zero_expert_padding(table.ptr + ep * (2 * El + 1), offsets.ptr, El, H, align,
                                      dtype, got.ptr, stream.s);
            CUDA_CHECK(cudaStreamSynchronize(stream.s));
            std::vector<float> expect = want_rows;
            if (dtype == DType::kBf16)
              for (float& v : expect) v = round_to_bf16(v);
            expect_identical(got.host(), expect, what + " " + dtype_name(dtype) + " padding");
          }
        }
}

// A pipelined step's merged weight-gradient layout on the device against core/layout.h's, and
// its gather against the CPU twin, byte for byte: rows of 48 bytes (16-byte moves), 20 (bytes)
// and a packed FP8 row's 4128, padding rows (random bytes before) zeroed, the sync-free grid
// (rows_bound past the rows) included.
TEST(DispatchCudaMergedChunks, LayoutAndGatherMatchTheCpu) {
  MOE_REQUIRE_GPU();
  Stream stream;
  std::mt19937_64 rng(771);
  std::uniform_int_distribution<int32_t> count(0, 40);
  for (int64_t C : {1, 2, 5})
    for (int64_t ep : {1, 2, 8})
      for (int64_t El : {1, 3, 32})
        for (int64_t align : {1, 16}) {
          const std::string what = "C=" + std::to_string(C) + " ep=" + std::to_string(ep) +
                                   " E_local=" + std::to_string(El) +
                                   " align=" + std::to_string(align);
          SCOPED_TRACE(what);
          const int64_t stride = El + 1;
          std::vector<std::vector<int32_t>> counts(C, std::vector<int32_t>(ep * stride));
          std::vector<std::vector<int64_t>> offsets(C, std::vector<int64_t>(El + 1));
          std::deque<DevBuf<int32_t>> d_counts;  // never moved
          std::deque<DevBuf<int64_t>> d_offsets;
          std::vector<ChunkRows> host_chunks(C), dev_chunks(C);
          int64_t rows = 0;
          for (int64_t c = 0; c < C; ++c) {
            for (int32_t& n : counts[c]) n = count(rng) < 10 ? 0 : count(rng);
            expert_major_offsets_strided(counts[c].data(), ep, stride, El, align,
                                         offsets[c].data());
            const int64_t begin = (rows + 127) / 128 * 128;
            host_chunks[c] = {counts[c].data(), stride, offsets[c].data(), begin};
            rows = begin + offsets[c][El];
          }
          for (int64_t c = 0; c < C; ++c) {
            d_counts.emplace_back(counts[c]);
            d_offsets.emplace_back(offsets[c]);
            dev_chunks[c] = {d_counts[c].ptr, stride, d_offsets[c].ptr, host_chunks[c].row_begin};
          }
          const int64_t nb = 3 * merged_chunk_blocks(C, ep, El);
          std::vector<int64_t> want_offsets(El + 1), want_blocks(nb);
          merged_chunk_layout(host_chunks.data(), C, ep, El, align, want_offsets.data(),
                              want_blocks.data());
          DevBuf<int64_t> got_offsets(std::vector<int64_t>(El + 1, -7)),
              got_blocks(std::vector<int64_t>(nb, -7));
          cuda::merge_chunk_layout(dev_chunks.data(), C, ep, El, align, got_offsets.ptr,
                                   got_blocks.ptr, stream.s);
          CUDA_CHECK(cudaStreamSynchronize(stream.s));
          EXPECT_EQ(got_offsets.host(), want_offsets) << what;
          EXPECT_EQ(got_blocks.host(), want_blocks) << what;
          const int64_t merged = want_offsets[El];
          for (size_t row_bytes : {size_t(48), size_t(20), size_t(4128)}) {
            std::vector<uint8_t> src(size_t(rows + 1) * row_bytes), junk(merged * row_bytes);
            for (uint8_t& b : src) b = uint8_t(rng());
            for (uint8_t& b : junk) b = uint8_t(rng());
            std::vector<uint8_t> want = junk;
            cpu::gather_chunk_rows(want_offsets.data(), want_blocks.data(), C, ep, El, src.data(),
                                   row_bytes, want.data());
            DevBuf<uint8_t> d_src(src), got(junk);
            cuda::gather_chunk_rows(got_offsets.ptr, got_blocks.ptr, C, ep, El, rows + 1, d_src.ptr,
                                    row_bytes, got.ptr, stream.s);
            CUDA_CHECK(cudaStreamSynchronize(stream.s));
            EXPECT_TRUE(got.host() == want) << what << " row bytes " << row_bytes;
          }
        }
}

// Expert-major blocks padded to multiples of align: random counts (zeros included, and blocks of
// up to 300 rows so that some experts end exactly on a multiple), both directions. Going to
// expert-major the padding rows (NaN before) must come out zero; coming back the padding of the
// source (random, not zero) must be skipped.
TEST(DispatchCudaRegroup, AlignedBothDirectionsMatchCpu) {
  MOE_REQUIRE_GPU();
  Stream stream;
  uint64_t seed = 350;
  for (DType dtype : kDTypes)
    for (int64_t align : {16, 128})
      for (int64_t ep : {1, 2, 8})
        for (int64_t El : {1, 3, 32, 40})  // ep 8 x 40 blocks: two of the offsets' scan tiles
          for (int pattern = 0; pattern < 4; ++pattern)
            for (int64_t H : {40, 5}) {
              std::vector<int32_t> counts;
              if (pattern < 3) {
                counts = regroup_counts(pattern, ep, El, seed++);
              } else {
                // Large blocks; local expert 0's total is a multiple of align (no padding).
                std::mt19937_64 rng(seed++);
                std::uniform_int_distribution<int32_t> dist(-100, 300);
                counts.resize(ep * El);
                for (int32_t& v : counts) v = std::max(0, dist(rng));
                int64_t rows0 = 0;
                for (int64_t s = 0; s < ep; ++s) rows0 += counts[s * El];
                counts[(ep - 1) * El] += int32_t((align - rows0 % align) % align);
              }
              const int64_t rows = std::accumulate(counts.begin(), counts.end(), int64_t(0));
              std::vector<int64_t> offsets(El + 1);
              expert_major_offsets(counts.data(), ep, El, align, offsets.data());
              const int64_t padded_rows = offsets[El];
              DevBuf<int32_t> d_counts(counts);
              DevBuf<int64_t> block_offsets(2 * ep * El);
              for (bool to_expert_major : {true, false}) {
                const std::string what =
                    std::string(dtype_name(dtype)) + " align=" + std::to_string(align) +
                    " ep=" + std::to_string(ep) + " E_local=" + std::to_string(El) +
                    " pattern=" + std::to_string(pattern) + " H=" + std::to_string(H) +
                    " rows=" + std::to_string(rows) + " padded=" + std::to_string(padded_rows) +
                    (to_expert_major ? " to expert-major" : " to rank-major");
                SCOPED_TRACE(what);
                // One spare row past each side's rows: dst's must stay NaN.
                const int64_t src_rows = to_expert_major ? rows : padded_rows;
                const int64_t dst_rows = to_expert_major ? padded_rows : rows;
                const std::vector<float> x =
                    random_values((src_rows + 1) * H, dtype, -1.0f, 1.0f, seed++);
                std::vector<float> want((dst_rows + 1) * H, NAN);
                cpu::regroup_rows(x.data(), counts.data(), ep, El, H, align, to_expert_major,
                                  want.data());
                StorageBuf src(dtype, x), dst(dtype, std::vector<float>((dst_rows + 1) * H, NAN));
                cuda::regroup_rows(src.ptr, d_counts.ptr, ep, El, H, align, rows + 1,
                                   to_expert_major, dtype, block_offsets.ptr, dst.ptr, stream.s);
                CUDA_CHECK(cudaStreamSynchronize(stream.s));
                const std::vector<float> got = dst.host();
                expect_identical(got, want, what);
                if (!to_expert_major) continue;
                int64_t nonzero = 0;
                for (int64_t l = 0; l < El; ++l) {
                  int64_t n = 0;
                  for (int64_t s = 0; s < ep; ++s) n += counts[s * El + l];
                  for (int64_t r = offsets[l] + n; r < offsets[l + 1]; ++r)
                    for (int64_t h = 0; h < H; ++h) {
                      const float v = got[r * H + h];
                      nonzero += !(v == 0.0f && !std::signbit(v));
                    }
                }
                EXPECT_EQ(nonzero, 0) << what << ": padding elements not +0";
              }
            }
}

// ---- combine and its backward ----

// A routed batch: T tokens, top-K of E experts, router weights p in [0, 1).
struct Routed {
  int64_t T = 45, K = 6, E = 32;
  Layout layout;
  std::vector<float> p;
  explicit Routed(uint64_t seed) {
    layout = cpu_layout(random_routing(T, K, first_experts(int32_t(E)), seed), T, K, E);
    p = random_values(T * K, DType::kFp32, 0.0f, 1.0f, seed + 1);
  }
};

TEST(DispatchCudaCombine, ForwardMatchesCpu) {
  MOE_REQUIRE_GPU();
  Stream stream;
  const Routed r(400);
  DevBuf<int32_t> send_pos(r.layout.send_pos);
  DevBuf<float> p(r.p);
  uint64_t seed = 410;
  for (DType dtype : kDTypes)
    for (int64_t H : {100, 300, 256}) {  // 256: 16-byte moves for bf16 and fp32
      const std::string what = std::string(dtype_name(dtype)) + " H=" + std::to_string(H);
      SCOPED_TRACE(what);
      const std::vector<float> y = random_values(r.T * r.K * H, dtype, -1.0f, 1.0f, seed++);
      std::vector<float> want(r.T * H);
      cpu::unpermute_combine(y.data(), r.layout.send_pos.data(), r.p.data(), r.T, r.K, H, dtype,
                             want.data());
      StorageBuf d_y(dtype, y), out(dtype, std::vector<float>(r.T * H, NAN));
      cuda::unpermute_combine(d_y.ptr, send_pos.ptr, p.ptr, r.T, r.K, H, dtype, out.ptr, stream.s);
      // K products of magnitude <= 1 summed in fp32 differ by well under 1e-6 with or without FMA.
      const int64_t n = r.T * H;
      expect_storage_close(out.host(), want, dtype, 2 + n / 1000, 1e-6, what);
    }
}

TEST(DispatchCudaCombine, BackwardMatchesCpu) {
  MOE_REQUIRE_GPU();
  Stream stream;
  const Routed r(500);
  DevBuf<int32_t> send_pos(r.layout.send_pos);
  DevBuf<float> p(r.p);
  uint64_t seed = 510;
  for (DType dtype : kDTypes)
    for (int64_t H : {100, 300, 256}) {  // 256: 16-byte moves for bf16 and fp32
      const std::string what = std::string(dtype_name(dtype)) + " H=" + std::to_string(H);
      SCOPED_TRACE(what);
      const std::vector<float> dout = random_values(r.T * H, dtype, -1.0f, 1.0f, seed++);
      const std::vector<float> y = random_values(r.T * r.K * H, dtype, -1.0f, 1.0f, seed++);
      std::vector<float> want_dy(r.T * r.K * H), want_dp(r.T * r.K);
      cpu::unpermute_combine_bwd(dout.data(), y.data(), r.layout.send_pos.data(), r.p.data(), r.T,
                                 r.K, H, dtype, want_dy.data(), want_dp.data());
      StorageBuf d_dout(dtype, dout), d_y(dtype, y);
      StorageBuf dy(dtype, std::vector<float>(r.T * r.K * H, NAN));
      DevBuf<float> dp(std::vector<float>(r.T * r.K, NAN));
      cuda::unpermute_combine_bwd(d_dout.ptr, d_y.ptr, send_pos.ptr, p.ptr, r.T, r.K, H, dtype,
                                  dy.ptr, dp.ptr, stream.s);
      // dy = p * dout is one product, rounded once: exact.
      expect_identical(dy.host(), want_dy, what + " dy_send");
      // dp: dot products of H terms summed in another order, within 1e-5 of the largest |dp|.
      double scale = 0.0;
      for (float v : want_dp) scale = std::max(scale, std::fabs(double(v)));
      const std::vector<float> got_dp = dp.host();
      int64_t bad = 0;
      for (size_t i = 0; i < got_dp.size(); ++i) {
        if (std::fabs(double(got_dp[i]) - want_dp[i]) <= 1e-5 * scale) continue;
        if (bad++ < 5) std::printf("  dp[%zu]: got %.9g want %.9g\n", i, got_dp[i], want_dp[i]);
      }
      EXPECT_EQ(bad, 0) << what << " dp: " << bad << " beyond 1e-5 of max |dp| = " << scale;
    }
}

TEST(DispatchCudaCombine, UnpermuteSumMatchesCpu) {
  MOE_REQUIRE_GPU();
  Stream stream;
  const Routed r(600);
  DevBuf<int32_t> send_pos(r.layout.send_pos);
  uint64_t seed = 610;
  for (DType dtype : kDTypes)
    for (int64_t H : {100, 300, 256}) {  // 256: 16-byte moves for bf16 and fp32
      const std::string what = std::string(dtype_name(dtype)) + " H=" + std::to_string(H);
      SCOPED_TRACE(what);
      const std::vector<float> dx_send = random_values(r.T * r.K * H, dtype, -1.0f, 1.0f, seed++);
      std::vector<float> want(r.T * H);
      cpu::unpermute_sum(dx_send.data(), r.layout.send_pos.data(), r.T, r.K, H, want.data());
      StorageBuf d_dx_send(dtype, dx_send);
      DevBuf<float> dx_acc(std::vector<float>(r.T * H, NAN));
      cuda::unpermute_sum(d_dx_send.ptr, send_pos.ptr, r.T, r.K, H, dtype, dx_acc.ptr, stream.s);
      EXPECT_EQ(count_mismatches(dx_acc.host(), want, 1e-6, what.c_str()), 0);
    }
}

// The combine kernels move 16 bytes at a time where rows allow it, else one element: the same
// arithmetic per element, so the same bits (dy_send, out, dx_acc; dp sums in another order).
// One element past an aligned base makes every row unaligned and forces the element path.
TEST(DispatchCudaCombine, PackedAndElementPathsAgreeBitwise) {
  MOE_REQUIRE_GPU();
  Stream stream;
  const Routed r(650);
  DevBuf<int32_t> send_pos(r.layout.send_pos);
  DevBuf<float> p(r.p);
  const int64_t H = 256, rows = r.T * r.K;
  uint64_t seed = 660;
  for (DType dtype : kDTypes) {
    const std::string what = dtype_name(dtype);
    SCOPED_TRACE(what);
    const size_t eb = dtype == DType::kBf16 ? 2 : 4;
    const std::vector<float> y = random_values(rows * H, dtype, -1.0f, 1.0f, seed++);
    const std::vector<float> dout = random_values(r.T * H, dtype, -1.0f, 1.0f, seed++);
    std::vector<float> out[2], dy[2], dx[2];
    for (int shift : {0, 1}) {
      // Every buffer holds one spare element; the same values start at element `shift`.
      auto at = [&](const StorageBuf& b) { return static_cast<char*>(b.ptr) + shift * eb; };
      StorageBuf d_y(dtype, shifted_by(y, shift)), d_dout(dtype, shifted_by(dout, shift));
      StorageBuf d_out(dtype, 1 + r.T * H), d_dy(dtype, 1 + rows * H);
      DevBuf<float> d_dx(size_t(1 + r.T * H)), d_dp(static_cast<size_t>(rows));
      cuda::unpermute_combine(at(d_y), send_pos.ptr, p.ptr, r.T, r.K, H, dtype, at(d_out),
                              stream.s);
      cuda::unpermute_combine_bwd(at(d_dout), at(d_y), send_pos.ptr, p.ptr, r.T, r.K, H, dtype,
                                  at(d_dy), d_dp.ptr, stream.s);
      cuda::unpermute_sum(at(d_y), send_pos.ptr, r.T, r.K, H, dtype, d_dx.ptr + shift, stream.s);
      CUDA_CHECK(cudaStreamSynchronize(stream.s));
      auto part = [&](const std::vector<float>& v, int64_t n) {
        return std::vector<float>(v.begin() + shift, v.begin() + shift + n);
      };
      out[shift] = part(d_out.host(), r.T * H);
      dy[shift] = part(d_dy.host(), rows * H);
      dx[shift] = part(d_dx.host(), r.T * H);
    }
    expect_identical(out[1], out[0], what + " out");
    expect_identical(dy[1], dy[0], what + " dy_send");
    expect_identical(dx[1], dx[0], what + " dx_acc");
  }
}

// Rows dropped by a capacity (send_pos -1): permute does not send them, the combine leaves them
// out with dp = 0, unpermute_sum skips them; everything else as on the CPU.
TEST(DispatchCudaCombine, DroppedRowsMatchCpu) {
  MOE_REQUIRE_GPU();
  Stream stream;
  const int64_t T = 45, K = 6, E = 32, capacity = 5;
  const std::vector<int32_t> idx = random_routing(T, K, first_experts(int32_t(E)), 1000);
  const std::vector<float> p = random_values(T * K, DType::kFp32, 0.0f, 1.0f, 1001);
  const Layout layout = cpu_layout_capacity(idx, p, T, K, E, capacity, false);
  const int64_t kept = std::accumulate(layout.counts.begin(), layout.counts.end(), int64_t(0));
  ASSERT_LT(kept, T * K) << "the case must drop rows";
  DevBuf<int32_t> send_pos(layout.send_pos);
  DevBuf<float> d_p(p);
  uint64_t seed = 1010;
  for (DType dtype : kDTypes)
    for (int64_t H : {100, 256}) {
      const std::string what = std::string(dtype_name(dtype)) + " H=" + std::to_string(H);
      SCOPED_TRACE(what);
      // permute: the kept rows, then one spare row that must stay NaN.
      const std::vector<float> x = random_values(T * H, dtype, -1.0f, 1.0f, seed++);
      std::vector<float> want_send((kept + 1) * H, NAN);
      cpu::permute_rows(x.data(), layout.send_pos.data(), T, K, H, want_send.data());
      StorageBuf d_x(dtype, x), send(dtype, std::vector<float>((kept + 1) * H, NAN));
      cuda::permute_rows(d_x.ptr, send_pos.ptr, T, K, H, dtype, send.ptr, stream.s);
      expect_identical(send.host(), want_send, what + " permute");

      const std::vector<float> y = random_values(kept * H, dtype, -1.0f, 1.0f, seed++);
      std::vector<float> want_out(T * H);
      cpu::unpermute_combine(y.data(), layout.send_pos.data(), p.data(), T, K, H, dtype,
                             want_out.data());
      StorageBuf d_y(dtype, y), out(dtype, std::vector<float>(T * H, NAN));
      cuda::unpermute_combine(d_y.ptr, send_pos.ptr, d_p.ptr, T, K, H, dtype, out.ptr, stream.s);
      expect_storage_close(out.host(), want_out, dtype, 2 + T * H / 1000, 1e-6, what + " out");

      const std::vector<float> dout = random_values(T * H, dtype, -1.0f, 1.0f, seed++);
      std::vector<float> want_dy((kept + 1) * H, NAN), want_dp(T * K);
      cpu::unpermute_combine_bwd(dout.data(), y.data(), layout.send_pos.data(), p.data(), T, K, H,
                                 dtype, want_dy.data(), want_dp.data());
      StorageBuf d_dout(dtype, dout), dy(dtype, std::vector<float>((kept + 1) * H, NAN));
      DevBuf<float> dp(std::vector<float>(T * K, NAN));
      cuda::unpermute_combine_bwd(d_dout.ptr, d_y.ptr, send_pos.ptr, d_p.ptr, T, K, H, dtype,
                                  dy.ptr, dp.ptr, stream.s);
      expect_identical(dy.host(), want_dy, what + " dy_send");
      const std::vector<float> got_dp = dp.host();
      double scale = 0.0;
      for (float v : want_dp) scale = std::max(scale, std::fabs(double(v)));
      int64_t bad = 0;
      for (size_t i = 0; i < got_dp.size(); ++i) {
        if (layout.send_pos[i] < 0) {
          EXPECT_EQ(got_dp[i], 0.0f) << what << " dp of dropped row " << i;
          continue;
        }
        if (std::fabs(double(got_dp[i]) - want_dp[i]) <= 1e-5 * scale) continue;
        if (bad++ < 5) std::printf("  dp[%zu]: got %.9g want %.9g\n", i, got_dp[i], want_dp[i]);
      }
      EXPECT_EQ(bad, 0) << what << " dp: " << bad << " beyond 1e-5 of max |dp| = " << scale;

      std::vector<float> want_dx(T * H);
      cpu::unpermute_sum(y.data(), layout.send_pos.data(), T, K, H, want_dx.data());
      DevBuf<float> dx_acc(std::vector<float>(T * H, NAN));
      cuda::unpermute_sum(d_y.ptr, send_pos.ptr, T, K, H, dtype, dx_acc.ptr, stream.s);
      EXPECT_EQ(count_mismatches(dx_acc.host(), want_dx, 1e-6, what.c_str()), 0) << what;
    }
}

// ---- SwiGLU ----

// GPU expf and CPU std::exp may differ in the last fp32 bit (and the GPU contracts the 1 + g*(..)
// of the backward into an FMA), so a bf16 output may round the other way: fewer than 0.5% of the
// elements (at least one allowed) one ulp off, none more.
TEST(DispatchCudaSwiglu, ForwardAndBackwardMatchCpu) {
  MOE_REQUIRE_GPU();
  Stream stream;
  struct Shape {
    int64_t n, F;
  };
  const Shape shapes[] = {{61, 96}, {5, 7}};
  uint64_t seed = 700;
  for (DType dtype : kDTypes)
    for (Shape s : shapes) {
      const std::string what = std::string(dtype_name(dtype)) + " n=" + std::to_string(s.n) +
                               " F=" + std::to_string(s.F);
      SCOPED_TRACE(what);
      std::vector<float> h = random_values(s.n * 2 * s.F, dtype, -3.0f, 3.0f, seed++);
      // Saturated gates and zeros: g in row 0, u in row 1.
      const float special[] = {0.0f, -0.0f, 8.0f, -8.0f, 20.0f, -20.0f, 1.0f};
      for (int i = 0; i < 7 && i < s.F; ++i) h[i] = h[2 * s.F + s.F + i] = special[i];
      const std::vector<float> da = random_values(s.n * s.F, dtype, -1.0f, 1.0f, seed++);
      std::vector<float> want_a(s.n * s.F), want_dh(s.n * 2 * s.F);
      cpu::swiglu_fwd(h.data(), s.n, s.F, dtype, want_a.data());
      cpu::swiglu_bwd(da.data(), h.data(), s.n, s.F, dtype, want_dh.data());
      // The row count is read on the device; the grid is sized for 3 rows more, which must
      // stay NaN.
      const int64_t bound = s.n + 3;
      StorageBuf d_h(dtype, padded_rows(h, 2 * s.F, bound)),
          d_da(dtype, padded_rows(da, s.F, bound));
      StorageBuf a(dtype, std::vector<float>(bound * s.F, NAN));
      StorageBuf dh(dtype, std::vector<float>(bound * 2 * s.F, NAN));
      DevBuf<int64_t> n_dev(std::vector<int64_t>{s.n});
      cuda::swiglu_fwd(d_h.ptr, n_dev.ptr, bound, s.F, dtype, a.ptr, stream.s);
      cuda::swiglu_bwd(d_da.ptr, d_h.ptr, n_dev.ptr, bound, s.F, dtype, dh.ptr, stream.s);
      const int64_t n_a = s.n * s.F, n_dh = 2 * n_a;
      const std::vector<float> got_a = a.host(), got_dh = dh.host();
      expect_storage_close(std::vector<float>(got_a.begin(), got_a.begin() + n_a), want_a, dtype,
                           std::max<int64_t>(1, (n_a - 1) / 200), 0.0, what + " a");
      expect_storage_close(std::vector<float>(got_dh.begin(), got_dh.begin() + n_dh), want_dh,
                           dtype, std::max<int64_t>(1, (n_dh - 1) / 200), 0.0, what + " dh");
      int64_t written_past = 0;
      for (size_t i = size_t(n_a); i < got_a.size(); ++i) written_past += !std::isnan(got_a[i]);
      for (size_t i = size_t(n_dh); i < got_dh.size(); ++i) written_past += !std::isnan(got_dh[i]);
      EXPECT_EQ(written_past, 0) << what << ": rows past the device's count written";
    }
}

// As for the combine: 16-byte moves where rows allow them, one element otherwise, same bits.
TEST(DispatchCudaSwiglu, PackedAndElementPathsAgreeBitwise) {
  MOE_REQUIRE_GPU();
  Stream stream;
  const int64_t n = 37, F = 96;
  uint64_t seed = 760;
  for (DType dtype : kDTypes) {
    const std::string what = dtype_name(dtype);
    SCOPED_TRACE(what);
    const size_t eb = dtype == DType::kBf16 ? 2 : 4;
    const std::vector<float> h_vals = random_values(n * 2 * F, dtype, -3.0f, 3.0f, seed++);
    const std::vector<float> da_vals = random_values(n * F, dtype, -1.0f, 1.0f, seed++);
    std::vector<float> a[2], dh[2];
    for (int shift : {0, 1}) {
      auto at = [&](const StorageBuf& b) { return static_cast<char*>(b.ptr) + shift * eb; };
      StorageBuf h(dtype, shifted_by(h_vals, shift)), da(dtype, shifted_by(da_vals, shift));
      StorageBuf d_a(dtype, 1 + n * F), d_dh(dtype, 1 + n * 2 * F);
      DevBuf<int64_t> n_dev(std::vector<int64_t>{n});
      cuda::swiglu_fwd(at(h), n_dev.ptr, n, F, dtype, at(d_a), stream.s);
      cuda::swiglu_bwd(at(da), at(h), n_dev.ptr, n, F, dtype, at(d_dh), stream.s);
      const std::vector<float> got_a = d_a.host(), got_dh = d_dh.host();
      a[shift].assign(got_a.begin() + shift, got_a.begin() + shift + n * F);
      dh[shift].assign(got_dh.begin() + shift, got_dh.begin() + shift + n * 2 * F);
    }
    expect_identical(a[1], a[0], what + " a");
    expect_identical(dh[1], dh[0], what + " dh");
  }
}

// ---- storage conversions ----

// Every bf16 bit pattern: widening is exact, and narrowing the result gives the pattern back
// (NaNs stay NaN; their payload may change).
TEST(DispatchCudaConvert, EveryBf16RoundTrips) {
  MOE_REQUIRE_GPU();
  Stream stream;
  std::vector<uint16_t> bits(1 << 16);
  std::iota(bits.begin(), bits.end(), uint16_t(0));
  std::vector<float> want(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) want[i] = bf16_bits_to_float(bits[i]);
  DevBuf<uint16_t> src(bits), back(bits.size());
  DevBuf<float> wide(bits.size());
  cuda::storage_to_f32(src.ptr, int64_t(bits.size()), DType::kBf16, wide.ptr, stream.s);
  cuda::f32_to_storage(wide.ptr, int64_t(bits.size()), DType::kBf16, back.ptr, stream.s);
  std::vector<float> got = wide.host();
  std::vector<uint16_t> got_back = back.host();
  for (size_t i = 0; i < bits.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "bf16 bits " << bits[i];
      EXPECT_TRUE(std::isnan(bf16_bits_to_float(got_back[i]))) << "bf16 bits " << bits[i];
      got[i] = want[i];  // NaN payloads are not compared
      got_back[i] = bits[i];
    }
  }
  expect_identical(got, want, "storage_to_f32");
  expect_identical(got_back, bits, "f32_to_storage(storage_to_f32)");
}

// fp32 -> bf16 rounds to nearest even exactly like moe::float_to_bf16_bits (ties both ways,
// overflow to inf, subnormals, signed zeros, random patterns); fp32 -> fp32 both ways is a copy.
TEST(DispatchCudaConvert, F32RoundsLikeHost) {
  MOE_REQUIRE_GPU();
  Stream stream;
  std::vector<uint32_t> patterns = {0x00000000u,
                                    0x80000000u,
                                    0x3f800000u,
                                    0x3f808000u /* tie, even: down */,
                                    0x3f818000u /* tie, odd: up */,
                                    0x3f808001u,
                                    0x3f807fffu,
                                    0x7f7fffffu /* -> inf */,
                                    0x7f7f7fffu,
                                    0xff7fffffu,
                                    0x7f800000u,
                                    0xff800000u,
                                    0x00000001u,
                                    0x00008000u,
                                    0x00018000u,
                                    0x007fffffu,
                                    0x807fffffu,
                                    0x80008000u,
                                    0x7fc00000u,
                                    0x7f800001u,
                                    0xffc00001u};
  std::mt19937_64 rng(800);
  while (patterns.size() < (1u << 18)) patterns.push_back(uint32_t(rng()));
  std::vector<float> x(patterns.size());
  std::memcpy(x.data(), patterns.data(), x.size() * sizeof(float));
  const int64_t n = int64_t(x.size());

  DevBuf<float> src(x), f32_out(x.size()), f32_back(x.size());
  DevBuf<uint16_t> narrow(x.size());
  cuda::f32_to_storage(src.ptr, n, DType::kBf16, narrow.ptr, stream.s);
  cuda::f32_to_storage(src.ptr, n, DType::kFp32, f32_out.ptr, stream.s);
  cuda::storage_to_f32(f32_out.ptr, n, DType::kFp32, f32_back.ptr, stream.s);
  std::vector<uint16_t> got = narrow.host(), want(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    want[i] = float_to_bf16_bits(x[i]);
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(bf16_bits_to_float(got[i]))) << "fp32 bits " << patterns[i];
      got[i] = want[i];  // NaN payloads are not compared
    }
  }
  expect_identical(got, want, "f32_to_storage bf16");
  expect_identical(f32_out.host(), x, "f32_to_storage fp32");
  expect_identical(f32_back.host(), x, "storage_to_f32 fp32");
}

// f32_to_storage's 16-byte path and its fallback: lengths that leave a tail (and shorter than
// one pack), and operands offset by one element (not 16-byte aligned); nothing past n is
// written.
TEST(DispatchCudaConvert, F32ToStorageTailsAndOffsets) {
  MOE_REQUIRE_GPU();
  Stream stream;
  for (const int64_t n : {int64_t(1), int64_t(7), int64_t(8), int64_t(9), int64_t(100003)}) {
    for (const int64_t off : {int64_t(0), int64_t(1)}) {
      const std::vector<float> x = random_values(n + off, DType::kFp32, -3.0f, 3.0f, 910 + n);
      DevBuf<float> src(x), wide(n + off + 1);
      DevBuf<uint16_t> narrow(n + off + 1);
      cuda::f32_to_storage(src.ptr + off, n, DType::kBf16, narrow.ptr + off, stream.s);
      cuda::f32_to_storage(src.ptr + off, n, DType::kFp32, wide.ptr + off, stream.s);
      const std::vector<uint16_t> got = narrow.host();
      const std::vector<float> got_wide = wide.host();
      std::vector<uint16_t> want(size_t(n + off + 1), 0);
      std::vector<float> want_wide(size_t(n + off + 1), 0.0f);
      for (int64_t i = off; i < n + off; ++i) {
        want[size_t(i)] = float_to_bf16_bits(x[size_t(i)]);
        want_wide[size_t(i)] = x[size_t(i)];
      }
      const std::string what = "n " + std::to_string(n) + " offset " + std::to_string(off);
      expect_identical(got, want, what + " bf16");
      expect_identical(got_wide, want_wide, what + " fp32");
    }
  }
}

// ---- determinism ----

struct ChainResult {
  std::vector<int32_t> counts, send_pos;
  std::vector<float> x_send, out, dp;
};

// layout -> permute -> combine (and the combine backward's dp) on fresh buffers.
ChainResult run_chain(DType dtype, cudaStream_t stream) {
  const int64_t T = 256, K = 8, E = 64, H = 128;
  const std::vector<int32_t> idx = random_routing(T, K, first_experts(int32_t(E)), 900);
  const std::vector<float> x = random_values(T * H, dtype, -1.0f, 1.0f, 901);
  const std::vector<float> p = random_values(T * K, DType::kFp32, 0.0f, 1.0f, 902);
  const std::vector<float> dout = random_values(T * H, dtype, -1.0f, 1.0f, 903);
  DevBuf<int32_t> d_idx(idx), counts(E), send_pos(T * K);
  DevBuf<float> d_p(p), dp(T * K);
  StorageBuf d_x(dtype, x), x_send(dtype, T * K * H), out(dtype, T * H), d_dout(dtype, dout);
  StorageBuf dy(dtype, T * K * H);
  cuda::dispatch_layout(d_idx.ptr, nullptr, T, K, E, 0, false, counts.ptr, send_pos.ptr, nullptr,
                        stream);
  cuda::permute_rows(d_x.ptr, send_pos.ptr, T, K, H, dtype, x_send.ptr, stream);
  // The permuted tokens stand in for the expert outputs.
  cuda::unpermute_combine(x_send.ptr, send_pos.ptr, d_p.ptr, T, K, H, dtype, out.ptr, stream);
  cuda::unpermute_combine_bwd(d_dout.ptr, x_send.ptr, send_pos.ptr, d_p.ptr, T, K, H, dtype, dy.ptr,
                              dp.ptr, stream);
  return {counts.host(), send_pos.host(), x_send.host(), out.host(), dp.host()};
}

TEST(DispatchCudaDeterminism, LayoutPermuteCombineTwiceBitwise) {
  MOE_REQUIRE_GPU();
  Stream stream;
  for (DType dtype : kDTypes) {
    const std::string what = dtype_name(dtype);
    SCOPED_TRACE(what);
    const ChainResult first = run_chain(dtype, stream.s);
    const ChainResult second = run_chain(dtype, stream.s);
    expect_identical(second.counts, first.counts, what + " expert_counts");
    expect_identical(second.send_pos, first.send_pos, what + " send_pos");
    expect_identical(second.x_send, first.x_send, what + " x_send");
    expect_identical(second.out, first.out, what + " out");
    expect_identical(second.dp, first.dp, what + " dp");
  }
}

// The backend's weights and tokens are generated on the device: the same values, bit for bit, as
// the host's init (which the reference and the CPU backend use), for every tensor's rule.
TEST(SeededFillCuda, MatchesHostInitBitwise) {
  MOE_REQUIRE_GPU();
  for (DType dt : {DType::kBf16, DType::kFp32}) {
    Workload w;
    w.model.hidden = 96;
    w.model.ffn = 40;
    w.model.experts = 6;
    w.model.topk = 2;
    w.tokens_per_rank = 8;
    w.dtype = dt;
    w.seed = 99;
    for (const InitRule& rule :
         {w_gate_rule(w), w_in_rule(w), w_out_rule(w), x_rule(w, 3, 7), dout_rule(w, 0, 2)}) {
      const int64_t begin = 12345, n = 70001;
      std::vector<float> want(n);
      init_range(rule, begin, begin + n, want.data());
      StorageBuf got(dt, n);
      cuda::fill_seeded(rule, begin, n, dt, got.ptr, nullptr);
      EXPECT_EQ(got.host(), want) << dtype_name(dt) << " stream " << rule.stream;
    }
  }
}

}  // namespace
}  // namespace moe::test
