#pragma once
// Host loops over billions of independent elements (seeded weights, digests, bf16 downloads) split
// into contiguous parts, one per thread. Callers combine the parts in part order, so results never
// depend on how many threads ran.
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace moe {

// Parts for n elements: one per hardware thread, but none smaller than min_per_part elements.
inline int part_count(int64_t n, int64_t min_per_part) {
  const int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  return int(std::max<int64_t>(1, std::min<int64_t>(hw, n / std::max<int64_t>(1, min_per_part))));
}

// Calls fn(part, begin, end) for each of `parts` contiguous slices of [0, n), on its own thread
// (the last on the caller's), and returns when all have.
template <class Fn>
void for_each_part(int64_t n, int parts, Fn fn) {
  std::vector<std::thread> pool;
  for (int t = 0; t + 1 < parts; ++t) pool.emplace_back(fn, t, n * t / parts, n * (t + 1) / parts);
  fn(parts - 1, n * (parts - 1) / parts, n);
  for (std::thread& th : pool) th.join();
}

// fn(i) for every i in [0, n), in parts of at least 1M elements, a thread each: the element-wise
// host passes (conversions, sums) over one expert's weights, hundreds of MB each, that one core
// would take most of a GPU reference's time to stream.
template <class Fn>
void for_each_element(int64_t n, Fn fn) {
  for_each_part(n, part_count(n, 1 << 20), [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) fn(i);
  });
}

}  // namespace moe
