// core/digest.h on the host: the same digest for any number of threads, and a different one for
// any change a run could make (a flipped bit, swapped or moved words, an extra zero byte).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/digest.h"
#include "core/parallel.h"

namespace moe {
namespace {

std::vector<unsigned char> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  for (unsigned char& c : v) c = static_cast<unsigned char>(rng());
  return v;
}

// The definition written out one word at a time: the sum of the terms, then the finish.
uint64_t digest_by_definition(const unsigned char* p, size_t bytes) {
  uint64_t sum = 0;
  for (uint64_t i = 0; i < (bytes + 7) / 8; ++i)
    sum += digest_term(i, digest_word_bytewise(p, bytes, i));
  return digest_finish(sum, bytes);
}

TEST(Digest, SameForAnyThreadCountAndMatchesTheDefinition) {
  for (size_t n :
       {size_t(0), size_t(1), size_t(7), size_t(8), size_t(9), size_t(4099), size_t(3 << 20) + 5}) {
    const std::vector<unsigned char> v = random_bytes(n + 1, n);
    for (size_t offset : {size_t(0), size_t(1)}) {  // unaligned buffers too
      const uint64_t want = digest_by_definition(v.data() + offset, n);
      for (int threads : {0, 1, 3, 8})
        EXPECT_EQ(digest_bytes(v.data() + offset, n, threads), want)
            << n << " bytes at offset " << offset << ", " << threads << " threads";
    }
  }
}

TEST(Digest, ChangesWithEveryKindOfDifference) {
  const std::vector<unsigned char> v = random_bytes(1 << 16, 7);
  const uint64_t base = digest_bytes(v.data(), v.size());
  std::vector<unsigned char> flipped = v;
  flipped[12345] ^= 0x10;
  EXPECT_NE(digest_bytes(flipped.data(), flipped.size()), base);
  std::vector<unsigned char> swapped = v;  // two whole words exchanged: the same multiset of words
  for (int b = 0; b < 8; ++b) std::swap(swapped[8 * 3 + b], swapped[8 * 900 + b]);
  EXPECT_NE(digest_bytes(swapped.data(), swapped.size()), base);
  std::vector<unsigned char> longer = v;  // a zero byte appended pads to the same words
  longer.push_back(0);
  EXPECT_NE(digest_bytes(longer.data(), longer.size()), base);
  const std::vector<unsigned char> zeros(64, 0);
  EXPECT_NE(digest_bytes(zeros.data(), 64), digest_bytes(zeros.data(), 56));
}

TEST(Parallel, PartsCoverTheRangeOnceInOrder) {
  for (int parts : {1, 2, 5}) {
    std::vector<int> seen(1000, 0);
    std::vector<int64_t> begins(parts, -1);
    for_each_part(1000, parts, [&](int part, int64_t b, int64_t e) {
      begins[part] = b;
      for (int64_t i = b; i < e; ++i) ++seen[i];
    });
    for (int c : seen) EXPECT_EQ(c, 1);
    for (int p = 1; p < parts; ++p) EXPECT_LT(begins[p - 1], begins[p]);
  }
  EXPECT_EQ(part_count(10, 1 << 20), 1);
  EXPECT_GE(part_count(int64_t(1) << 40, 1), 1);
}

}  // namespace
}  // namespace moe
