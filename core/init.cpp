#include "core/init.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "core/bf16.h"

namespace moe {
namespace {

enum Stream : uint64_t { kWGate = 1, kBias = 2, kWIn = 3, kWOut = 4, kX = 5, kDout = 6 };

uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float stored(const Workload& w, float v) { return w.dtype == DType::kBf16 ? round_to_bf16(v) : v; }

// Uniform with the given standard deviation: U(-1,1) has std 1/sqrt(3). Every element is
// independent, so large ranges (a DeepSeek-V3 rank holds billions) are split over threads.
void fill(const Workload& w, uint64_t stream, int64_t begin, int64_t end, float std_dev,
          float* out) {
  const float scale = std_dev * std::sqrt(3.0f);
  auto part = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      out[i - begin] = stored(w, scale * hashed_uniform(w.seed, stream, uint64_t(i)));
  };
  const int64_t n = end - begin;
  const int64_t threads =
      std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), n / (1 << 20) + 1);
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t)
    pool.emplace_back(part, begin + n * t / threads, begin + n * (t + 1) / threads);
  part(begin, begin + n / threads);
  for (std::thread& th : pool) th.join();
}

uint64_t token_stream(uint64_t base, int rank, int64_t step) {
  return base | (uint64_t(step) << 8) | (uint64_t(rank) << 40);
}

}  // namespace

float hashed_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t h = splitmix64(splitmix64(seed ^ splitmix64(stream)) ^ index);
  return float(int64_t(h >> 40) - (int64_t(1) << 23)) * (1.0f / float(1 << 23));
}

void init_w_gate(const Workload& w, float* out) {
  const auto& m = w.model;
  fill(w, kWGate, 0, m.hidden * m.experts, 1.0f / std::sqrt(float(m.hidden)), out);
}

void init_expert_bias(const Workload& w, float* out) {
  for (int64_t e = 0; e < w.model.experts; ++e) out[e] = 0.1f * hashed_uniform(w.seed, kBias, e);
}

void init_w_in_range(const Workload& w, int64_t begin, int64_t end, float* out) {
  fill(w, kWIn, begin, end, 1.0f / std::sqrt(float(w.model.hidden)), out);
}

void init_w_out_range(const Workload& w, int64_t begin, int64_t end, float* out) {
  fill(w, kWOut, begin, end, 1.0f / std::sqrt(float(w.model.ffn)), out);
}

void init_x(const Workload& w, int rank, int64_t step, float* out) {
  fill(w, token_stream(kX, rank, step), 0, w.tokens_per_rank * w.model.hidden, 1.0f, out);
}

void init_dout(const Workload& w, int rank, int64_t step, float* out) {
  fill(w, token_stream(kDout, rank, step), 0, w.tokens_per_rank * w.model.hidden, 1.0f, out);
}

}  // namespace moe
