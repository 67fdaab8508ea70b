#pragma once
// A 64-bit digest of raw bytes that the host and the GPU compute alike: the sum (mod 2^64), over
// the buffer's 8-byte little-endian words (the last one zero-padded), of a mix of each word with
// its position, finished with the byte count. A sum, unlike a chained hash such as FNV-1a, splits
// over any number of threads or GPU blocks with the same result, so digesting a DeepSeek-V3
// rank's 20 GB of gradients takes milliseconds on the device instead of minutes on the host.
// Equal digests mean bitwise identical bytes, up to a 2^-64 chance.
#include <cstddef>
#include <cstdint>

#include "core/hd.h"

namespace moe {

// Recorded next to the digests in result JSON, so that `compare` never matches digests of
// different functions (results before this one used byte-wise FNV-1a, "fnv1a64").
constexpr const char* kDigestFunction = "mixsum64";

// splitmix64's finalizer: every input bit flips each output bit with probability about 1/2.
MOE_HD inline uint64_t digest_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Word i's term: keyed by position, so that moved or swapped words change the sum.
MOE_HD inline uint64_t digest_term(uint64_t i, uint64_t word) {
  return digest_mix(word ^ digest_mix(i + 0x9e3779b97f4a7c15ull));
}

// Word i of a buffer of `bytes` bytes, assembled byte by byte (a partial last word, or a buffer
// not aligned to 8).
MOE_HD inline uint64_t digest_word_bytewise(const unsigned char* p, uint64_t bytes, uint64_t i) {
  uint64_t w = 0;
  for (uint64_t b = 0; b < 8 && 8 * i + b < bytes; ++b) w |= uint64_t(p[8 * i + b]) << (8 * b);
  return w;
}

MOE_HD inline uint64_t digest_finish(uint64_t sum, uint64_t bytes) {
  return digest_mix(sum ^ digest_mix(bytes ^ 0xd1b54a32d192ed03ull));
}

// The digest of host memory, over `threads` threads (0: as many as help).
uint64_t digest_bytes(const void* p, size_t bytes, int threads = 0);

}  // namespace moe
