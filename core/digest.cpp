#include "core/digest.h"

#include <cstring>
#include <vector>

#include "core/parallel.h"

namespace moe {

uint64_t digest_bytes(const void* p, size_t bytes, int threads) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  const int64_t full = int64_t(bytes / 8), words = int64_t((bytes + 7) / 8);
  const int parts = threads > 0 ? threads : part_count(words, 1 << 20);
  std::vector<uint64_t> sums(parts, 0);
  for_each_part(full, parts, [&](int part, int64_t begin, int64_t end) {
    uint64_t s = 0;
    for (int64_t i = begin; i < end; ++i) {
      uint64_t w;
      std::memcpy(&w, c + 8 * i, 8);  // the host is little-endian, like the GPU
      s += digest_term(uint64_t(i), w);
    }
    sums[part] = s;
  });
  uint64_t sum = 0;
  for (uint64_t s : sums) sum += s;
  if (words > full) sum += digest_term(uint64_t(full), digest_word_bytewise(c, bytes, full));
  return digest_finish(sum, bytes);
}

}  // namespace moe
