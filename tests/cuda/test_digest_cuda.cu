// The device digest (kernels/cuda/digest.h) against its host twin (core/digest.h) on random bytes
// of awkward sizes and alignments: the run's result digests must not depend on where they were
// computed.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/digest.h"
#include "kernels/cuda/digest.h"
#include "tests/cuda/cuda_test_util.h"

namespace moe::test {
namespace {

TEST(DigestCuda, MatchesTheHost) {
  MOE_REQUIRE_GPU();
  DevBuf<unsigned long long> sum(1);
  for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(13), size_t(4099),
                   size_t(3 << 20) + 5, size_t(64) << 20}) {
    std::mt19937_64 rng(n);
    std::vector<unsigned char> host(n + 1);
    for (unsigned char& c : host) c = static_cast<unsigned char>(rng());
    DevBuf<unsigned char> dev(host);
    for (size_t offset : {size_t(0), size_t(1)}) {
      cuda::digest_sum(dev.ptr + offset, n, sum.ptr, nullptr);
      const uint64_t got = digest_finish(sum.host()[0], n);
      EXPECT_EQ(got, digest_bytes(host.data() + offset, n)) << n << " bytes at offset " << offset;
    }
  }
}

}  // namespace
}  // namespace moe::test
