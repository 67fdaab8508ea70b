// The deduplicated dispatcher's CUDA kernels against their CPU twins on seeded random routings:
// dedup_layout exactly (kernels/cuda/layout.h: wire rows, counts, slots and weights), and
// unpermute_sum_storage (kernels/cuda/combine.h), whose fp32 sums add in the twin's order and
// round once, exactly. Then the nvlink dispatcher's row moves (kernels/cuda/permute.h
// rows_to_ranks, rows_to_sources) byte for byte, with one GPU's buffers standing in for the ranks'
// windows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/combine.h"
#include "kernels/cpu/layout.h"
#include "kernels/cpu/permute.h"
#include "kernels/cuda/combine.h"
#include "kernels/cuda/layout.h"
#include "kernels/cuda/permute.h"
#include "tests/cuda/cuda_test_util.h"

namespace moe::test {
namespace {

// One source rank's routing (K distinct experts a token, p in [0, 1)) and its layout, with
// capacity drops where capacity > 0.
struct Routing {
  int64_t T, K, E;
  std::vector<int32_t> idx, counts, send_pos;
  std::vector<float> p;
};

Routing routing(int64_t T, int64_t K, int64_t E, int64_t capacity, bool by_position,
                uint64_t seed) {
  Routing r{T, K, E, {}, std::vector<int32_t>(E), std::vector<int32_t>(T * K), {}};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<int32_t> experts(E);
  for (int32_t e = 0; e < E; ++e) experts[e] = e;
  for (int64_t t = 0; t < T; ++t) {
    std::shuffle(experts.begin(), experts.end(), rng);
    r.idx.insert(r.idx.end(), experts.begin(), experts.begin() + K);
    for (int64_t k = 0; k < K; ++k) r.p.push_back(unit(rng));
  }
  cpu::dispatch_layout(r.idx.data(), r.p.data(), T, K, E, capacity, by_position, r.counts.data(),
                       r.send_pos.data());
  return r;
}

template <class V>
int64_t differences(const std::vector<V>& got, const std::vector<V>& want) {
  int64_t bad = got.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    bad += !(got[i] == want[i] || (std::isnan(double(got[i])) && std::isnan(double(want[i]))));
  return bad;
}

TEST(DedupCuda, DedupLayoutMatchesCpu) {
  MOE_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  uint64_t seed = 1500;
  // (ep, E_local): one expert a rank, a few, many; ep 1 to 8.
  const std::pair<int64_t, int64_t> groups[] = {{1, 16}, {2, 3}, {4, 1}, {4, 16}, {8, 3}, {8, 1}};
  for (const auto& [ep, El] : groups)
    for (int64_t capacity : {0, 2})
      for (int64_t T : {1, 37, 700}) {  // one chunk of 256 tokens, and several
        const int64_t E = ep * El, K = std::min<int64_t>(6, E);
        const std::string what = "ep " + std::to_string(ep) + " E_local " + std::to_string(El) +
                                 " capacity " + std::to_string(capacity) + " T " +
                                 std::to_string(T);
        SCOPED_TRACE(what);
        const Routing r = routing(T, K, E, capacity, capacity > 0 && El == 3, seed++);
        const int64_t W = T * std::min(K, ep);
        std::vector<int32_t> pos(T * ep), counts(ep), slots(W * K, -7);
        std::vector<float> weights(W * K, NAN);
        cpu::dedup_layout(r.idx.data(), r.p.data(), r.counts.data(), r.send_pos.data(), T, K, E, ep,
                          pos.data(), counts.data(), slots.data(), weights.data());
        DevBuf<int32_t> d_idx(r.idx), d_counts(r.counts), d_send_pos(r.send_pos);
        DevBuf<float> d_p(r.p);
        DevBuf<int32_t> d_pos(std::vector<int32_t>(T * ep, -9)),
            d_wire(std::vector<int32_t>(ep, -9));
        DevBuf<int32_t> d_slots(std::vector<int32_t>(W * K, -7));
        DevBuf<float> d_weights(std::vector<float>(W * K, NAN));
        DevBuf<uint8_t> scratch(cuda::dedup_layout_scratch_bytes(T, ep));
        cuda::dedup_layout(d_idx.ptr, d_p.ptr, d_counts.ptr, d_send_pos.ptr, T, K, E, ep, d_pos.ptr,
                           d_wire.ptr, d_slots.ptr, d_weights.ptr, scratch.ptr, stream);
        EXPECT_EQ(differences(d_wire.host(), counts), 0) << what << ": wire counts";
        EXPECT_EQ(differences(d_pos.host(), pos), 0) << what << ": wire positions";
        EXPECT_EQ(differences(d_slots.host(), slots), 0) << what << ": slots";
        EXPECT_EQ(differences(d_weights.host(), weights), 0) << what << ": weights";
      }
}

TEST(DedupCuda, UnpermuteSumStorageMatchesCpu) {
  MOE_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  // Rows summed per token as the dedup dispatcher sums them: K slots a wire row (some -1), and
  // ep wire rows a token (some -1).
  const Routing r = routing(53, 4, 12, 3, false, 1600);
  const int64_t rows = r.T * r.K;
  DevBuf<int32_t> d_send_pos(r.send_pos);
  for_each_row_layout(
      rows, 1610,
      [&](DType dtype, int64_t H, int shift, const std::string& what,
          const std::vector<float>& src) {
        std::vector<float> want(r.T * H);
        cpu::unpermute_sum_storage(src.data(), r.send_pos.data(), r.T, r.K, H, dtype, want.data());
        StorageBuf d_src(dtype, shifted_by(src, shift));
        StorageBuf d_out(dtype, std::vector<float>(r.T * H + 1, NAN));
        const size_t eb = dtype == DType::kBf16 ? 2 : 4;
        cuda::unpermute_sum_storage(static_cast<char*>(d_src.ptr) + shift * eb, d_send_pos.ptr, r.T,
                                    r.K, H, dtype, static_cast<char*>(d_out.ptr) + shift * eb,
                                    stream);
        std::vector<float> got = d_out.host();
        got.erase(got.begin(), got.begin() + shift);
        got.resize(want.size());
        EXPECT_EQ(differences(got, want), 0) << what;
      });
}

// Random wire rows: (t, r) has one with probability 1/2, numbered per rank as a source's wire
// order would (distinct rows, so no two moves write one place); the most rows a rank takes.
struct WirePlan {
  std::vector<int32_t> pos;  // [n, ep]
  int64_t rows = 0;
};

WirePlan wire_plan(int64_t n, int64_t ep, std::mt19937_64& rng) {
  WirePlan w{std::vector<int32_t>(n * ep, -1), 0};
  std::vector<int32_t> next(ep, 0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < ep; ++r)
      if (rng() % 2) w.pos[i * ep + r] = next[r]++;
  for (int32_t c : next) w.rows = std::max<int64_t>(w.rows, c);
  return w;
}

TEST(NvlinkRowMovesCuda, MatchTheCpuByteForByte) {
  MOE_REQUIRE_GPU();
  cudaStream_t stream = nullptr;  // the default stream, as the tests above
  std::mt19937_64 rng(1291);
  for (int64_t ep : {2, 3, 8})
    for (int64_t T : {1, 37, 300})
      for (size_t row_bytes : {size_t(16), size_t(20), size_t(4128)}) {
        const std::string what = "ep=" + std::to_string(ep) + " T=" + std::to_string(T) +
                                 " row_bytes=" + std::to_string(row_bytes);
        SCOPED_TRACE(what);
        auto bytes = [&](size_t n) {
          std::vector<uint8_t> v(n);
          for (uint8_t& b : v) b = uint8_t(rng());
          return v;
        };
        // rows_to_ranks: this rank (1) writes its T rows into every rank's [ep * T] rows.
        const int64_t me = 1;
        const WirePlan to_ranks = wire_plan(T, ep, rng);
        const std::vector<uint8_t> src = bytes(size_t(T) * row_bytes);
        std::vector<std::vector<uint8_t>> want(ep);
        std::deque<DevBuf<uint8_t>> got;  // never moved
        void* want_at[kMaxWindowRanks] = {};
        cuda::RankPointers got_at{};
        for (int64_t r = 0; r < ep; ++r) {
          want[r] = bytes(size_t(ep * T) * row_bytes);
          got.emplace_back(want[r]);
          want_at[r] = want[r].data();
          got_at.at[r] = got[r].ptr;
        }
        DevBuf<uint8_t> d_src(src);
        DevBuf<int32_t> d_pos(to_ranks.pos);
        cpu::rows_to_ranks(src.data(), row_bytes, to_ranks.pos.data(), T, ep, me * T, want_at);
        cuda::rows_to_ranks(d_src.ptr, row_bytes, d_pos.ptr, T, ep, me * T, got_at, stream);
        CUDA_CHECK(cudaStreamSynchronize(stream));
        for (int64_t r = 0; r < ep; ++r) EXPECT_TRUE(got[r].host() == want[r]) << "rank " << r;

        // rows_to_sources: the group's ep * T rows back to their sources' wire rows.
        const WirePlan back = wire_plan(ep * T, ep, rng);
        const std::vector<uint8_t> group = bytes(size_t(ep * T) * row_bytes);
        std::deque<DevBuf<uint8_t>> got_back;
        std::vector<std::vector<uint8_t>> want_back(ep);
        for (int64_t s = 0; s < ep; ++s) {
          want_back[s] = bytes(size_t(back.rows + 1) * row_bytes);
          got_back.emplace_back(want_back[s]);
          want_at[s] = want_back[s].data();
          got_at.at[s] = got_back[s].ptr;
        }
        DevBuf<uint8_t> d_group(group);
        DevBuf<int32_t> d_back(back.pos);
        cpu::rows_to_sources(group.data(), row_bytes, back.pos.data(), T, ep, me, want_at);
        cuda::rows_to_sources(d_group.ptr, row_bytes, d_back.ptr, T, ep, me, got_at, stream);
        CUDA_CHECK(cudaStreamSynchronize(stream));
        for (int64_t s = 0; s < ep; ++s)
          EXPECT_TRUE(got_back[s].host() == want_back[s]) << "source " << s;
      }
}

}  // namespace
}  // namespace moe::test
