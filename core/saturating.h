#pragma once
// Saturating int64 arithmetic for sizes derived from a workload: an absurd config reads as "too
// big" (INT64_MAX) instead of wrapping around into a small or negative number.
#include <cstdint>
#include <initializer_list>

namespace moe {

inline int64_t saturating_product(std::initializer_list<int64_t> xs) {
  int64_t p = 1;
  for (int64_t x : xs)
    if (__builtin_mul_overflow(p, x, &p)) return INT64_MAX;
  return p;
}

inline int64_t saturating_sum(std::initializer_list<int64_t> xs) {
  int64_t s = 0;
  for (int64_t x : xs)
    if (__builtin_add_overflow(s, x, &s)) return INT64_MAX;
  return s;
}

}  // namespace moe
