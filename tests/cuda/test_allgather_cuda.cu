// The all-gather dispatcher's CUDA kernels against their CPU twins on seeded random routings of
// simulated EP groups: expert_major_positions exactly (kernels/cuda/layout.h), and the fp32
// partial combine (kernels/cuda/combine.h unpermute_combine_f32, whose twin is
// cpu::unpermute_combine with out_dtype fp32) within fp32 rounding (the GPU contracts a*b + c).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/layout.h"
#include "kernels/cpu/combine.h"
#include "kernels/cpu/layout.h"
#include "kernels/cuda/combine.h"
#include "kernels/cuda/layout.h"
#include "tests/cuda/cuda_test_util.h"

namespace moe::test {
namespace {

// An EP group's gathered layout seen from rank `rank`: every source's send positions (with
// capacity drops where capacity > 0) and the rank's starts and dest tables.
struct Gathered {
  int64_t ep, El, T, K;
  std::vector<int32_t> send_pos, starts, dest;
  std::vector<float> p;
  int64_t rows = 0;  // the rank's expert-major rows, padding included
};

Gathered gathered(int64_t ep, int64_t El, int64_t T, int64_t K, int64_t capacity, int64_t align,
                  int64_t rank, uint64_t seed) {
  const int64_t E = ep * El;
  Gathered g{ep, El, T, K, {}, std::vector<int32_t>(ep * (El + 1)), std::vector<int32_t>(ep * El),
             {}};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<int32_t> experts(E), counts_all;
  for (int32_t e = 0; e < E; ++e) experts[e] = e;
  for (int64_t s = 0; s < ep; ++s) {
    std::vector<int32_t> idx, counts(E), send_pos(T * K);
    std::vector<float> p;
    for (int64_t t = 0; t < T; ++t) {
      std::shuffle(experts.begin(), experts.end(), rng);
      idx.insert(idx.end(), experts.begin(), experts.begin() + K);
      for (int64_t k = 0; k < K; ++k) p.push_back(unit(rng));
    }
    cpu::dispatch_layout(idx.data(), p.data(), T, K, E, capacity, false, counts.data(),
                         send_pos.data());
    counts_all.insert(counts_all.end(), counts.begin(), counts.end());
    g.send_pos.insert(g.send_pos.end(), send_pos.begin(), send_pos.end());
    g.p.insert(g.p.end(), p.begin(), p.end());
  }
  std::vector<int32_t> recv(ep * El);
  std::vector<int64_t> offsets(El + 1);
  gathered_layout(counts_all.data(), ep, E, rank, align, recv.data(), offsets.data(),
                  g.starts.data(), g.dest.data());
  g.rows = offsets[El];
  return g;
}

std::vector<int32_t> cpu_positions(const Gathered& g) {
  std::vector<int32_t> pos(g.send_pos.size());
  cpu::expert_major_positions(g.send_pos.data(), g.starts.data(), g.dest.data(), g.ep, g.T * g.K,
                              g.El, pos.data());
  return pos;
}

TEST(AllgatherCuda, ExpertMajorPositionsMatchCpu) {
  MOE_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  uint64_t seed = 700;
  for (int64_t ep : {1, 2, 4, 8})
    for (int64_t El : {1, 3, 16})
      for (int64_t capacity : {0, 2})
        for (int64_t rank : {int64_t(0), ep - 1}) {
          const std::string what = "ep " + std::to_string(ep) + " E_local " + std::to_string(El) +
                                   " capacity " + std::to_string(capacity) + " rank " +
                                   std::to_string(rank);
          SCOPED_TRACE(what);
          const Gathered g =
              gathered(ep, El, 37, std::min<int64_t>(4, ep * El), capacity, 8, rank, seed++);
          const std::vector<int32_t> want = cpu_positions(g);
          DevBuf<int32_t> send_pos(g.send_pos), starts(g.starts), dest(g.dest);
          DevBuf<int32_t> pos(std::vector<int32_t>(want.size(), -7));
          cuda::expert_major_positions(send_pos.ptr, starts.ptr, dest.ptr, ep, g.T * g.K, El,
                                       pos.ptr, stream);
          const std::vector<int32_t> got = pos.host();
          int64_t bad = 0;
          for (size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];
          EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " positions differ";
        }
}

TEST(AllgatherCuda, PartialCombineMatchesCpu) {
  MOE_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  const Gathered g = gathered(4, 3, 29, 4, 3, 4, 1, 800);
  const std::vector<int32_t> pos = cpu_positions(g);
  const int64_t tokens = g.ep * g.T;
  DevBuf<int32_t> d_pos(pos);
  DevBuf<float> d_p(g.p);
  for_each_row_layout(
      g.rows, 810,
      [&](DType dtype, int64_t H, int shift, const std::string& what, const std::vector<float>& y) {
        std::vector<float> want(tokens * H);
        cpu::unpermute_combine(y.data(), pos.data(), g.p.data(), tokens, g.K, H, DType::kFp32,
                               want.data());
        StorageBuf d_y(dtype, shifted_by(y, shift));
        DevBuf<float> out(std::vector<float>(tokens * H + 1, NAN));
        const size_t eb = dtype == DType::kBf16 ? 2 : 4;
        cuda::unpermute_combine_f32(static_cast<char*>(d_y.ptr) + shift * eb, d_pos.ptr, d_p.ptr,
                                    tokens, g.K, H, dtype, out.ptr + shift, stream);
        std::vector<float> got = out.host();
        got.erase(got.begin(), got.begin() + shift);
        got.resize(want.size());
        EXPECT_EQ(count_mismatches(got, want, 1e-6, what.c_str()), 0) << what;
      });
}

}  // namespace
}  // namespace moe::test
