#pragma once
// Host loops over billions of independent elements (seeded weights, digests, bf16 downloads) split
// into contiguous parts, one per thread. Callers combine the parts in part order, so results never
// depend on how many threads ran.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace moe {

// The most parts part_count gives; 0: one per hardware thread. A run shares the host's threads
// out between its ranks on the host with it (app/run_command.cpp); tests set it to show that
// results do not depend on how many threads ran.
inline std::atomic<int>& max_parts() {
  static std::atomic<int> cap{0};
  return cap;
}

// Parts for n elements: one per hardware thread (or max_parts), but none smaller than
// min_per_part elements.
inline int part_count(int64_t n, int64_t min_per_part) {
  const int cap = max_parts().load();
  const int64_t hw = cap > 0 ? cap : std::max(1u, std::thread::hardware_concurrency());
  return int(std::max<int64_t>(1, std::min<int64_t>(hw, n / std::max<int64_t>(1, min_per_part))));
}

// part_count for `units` pieces that must not be cut (rows, blocks, chunks) of `elements` elements
// in all: no more parts than units.
inline int part_count_of_units(int64_t units, int64_t elements, int64_t min_per_part) {
  return int(std::min<int64_t>(std::max<int64_t>(units, 1), part_count(elements, min_per_part)));
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

// fn(begin, end) over contiguous parts of [0, n), a thread each, where index i costs
// work_per_index multiply-adds and a part at least 4M of them (below that a thread costs more than
// it saves). For the float64 reference's loops over an output's rows or columns: each element is
// still summed by one thread in the same order, so the results are the one-thread loop's, bit for
// bit.
template <class Fn>
void for_each_range(int64_t n, int64_t work_per_index, Fn fn) {
  for_each_part(n, part_count_of_units(n, n * work_per_index, int64_t(1) << 22),
                [&](int, int64_t begin, int64_t end) { fn(begin, end); });
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

// fn(b) for each of n rows of `cols` values, the rows split over threads in parts of at least
// 256K values: the FP8 reference's element-wise passes over one expert's operands, which on
// DeepSeek-V3's shapes took a core seconds per check. Each row is one thread's, in the serial
// loop's order, so the results are the serial loop's.
template <class Fn>
void for_each_row(int64_t n, int64_t cols, Fn fn) {
  for_each_part(n, part_count_of_units(n, n * cols, int64_t(1) << 18),
                [&](int, int64_t b0, int64_t b1) {
                  for (int64_t b = b0; b < b1; ++b) fn(b);
                });
}

// out = v converted element by element (float to double or back), in threads (for_each_element);
// out's storage is reused where it is large enough.
template <class From, class To>
void convert_into(const From* v, int64_t n, std::vector<To>& out) {
  out.resize(n);
  To* o = out.data();
  for_each_element(n, [&](int64_t i) { o[i] = To(v[i]); });
}

}  // namespace moe
