// The router's backward GEMMs on the GPU (kernels/cuda/router_grads.h): the three-term bf16 split
// is exact, and dx_acc and dw_gate match a float64 host product within fp32 summation error, with
// bf16 and fp32 storage (a plain bf16 GEMM of dlogits misses the bound by orders of magnitude).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/router_grads.h"
#include "tests/cuda/cuda_test_util.h"

namespace moe::test {
namespace {

TEST(RouterGradsCuda, SplitIntoThreeBf16TermsIsExact) {
  MOE_REQUIRE_GPU();
  // Values over a wide range of exponents and both signs, with zeros and bf16-exact values.
  const int64_t rows = 37, cols = 53;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-60, 60);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::ldexp(unit(rng), exponent(rng));
  v[0] = 0.0f;
  v[1] = -0.0f;
  v[2] = round_to_bf16(0.3f);
  v[3] = std::nextafter(1.0f, 2.0f);  // 1 + 2^-23: the last bit in lo
  v[4] = std::nextafter(2.0f, 0.0f);  // just below a power of two: hi rounds up to it
  DevBuf<float> src(v);
  DevBuf<uint16_t> terms(size_t(rows * 3 * cols));
  cuda::split_bf16x3(src.ptr, rows, cols, terms.ptr, 0);
  const std::vector<uint16_t> t = terms.host();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float x = v[size_t(r * cols + c)];
      const uint16_t* row = t.data() + r * 3 * cols + c;
      ASSERT_EQ(row[0], float_to_bf16_bits(x)) << "hi of " << x;
      const double sum = double(bf16_bits_to_float(row[0])) +
                         double(bf16_bits_to_float(row[cols])) +
                         double(bf16_bits_to_float(row[2 * cols]));
      ASSERT_EQ(sum, double(x)) << "row " << r << " col " << c;
    }
}

// dx_acc = dx0 + dlogits @ w_gate^T and dw_gate = x^T @ dlogits on the GPU against float64 sums
// of the same values: each entry within 1e-5 of the sum of its products' magnitudes (fp32 sums
// of a few hundred terms stay near 1e-6 of it; bf16-rounded dlogits would miss it by ~1e-3).
void expect_router_grads_match_fp64(DType dtype, int64_t T, int64_t H, int64_t E) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " T " + std::to_string(T) + " H " +
               std::to_string(H) + " E " + std::to_string(E));
  std::mt19937_64 rng(uint64_t(T * 131 + H * 7 + E));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  auto values = [&](int64_t n, bool storage) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = storage && dtype == DType::kBf16 ? round_to_bf16(unit(rng)) : unit(rng);
    return v;
  };
  // dlogits of mixed magnitudes, as softmax gradients have.
  std::vector<float> dl = values(T * E, false);
  for (float& x : dl) x = std::ldexp(x, int(std::lround(8.0f * unit(rng))));
  const std::vector<float> x = values(T * H, true), w = values(H * E, true);
  const std::vector<float> dx0 = values(T * H, false);

  DevBuf<float> d_dl(dl), d_dx(dx0), d_dw(size_t(H * E));
  StorageBuf d_x(dtype, x), d_w(dtype, w);
  DevBuf<uint8_t> scratch(std::max<size_t>(1, cuda::router_grads_scratch_bytes(T, H, E, dtype)));
  cuda::GemmRunner gemm(1);
  cuda::router_grads(gemm, d_dl.ptr, d_x.ptr, d_w.ptr, T, H, E, dtype, d_dx.ptr, d_dw.ptr,
                     scratch.ptr, 0);
  const std::vector<float> dx = d_dx.host(), dw = d_dw.host();

  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      double sum = dx0[size_t(t * H + h)], mag = std::fabs(sum);
      for (int64_t e = 0; e < E; ++e) {
        const double term = double(dl[size_t(t * E + e)]) * double(w[size_t(h * E + e)]);
        sum += term;
        mag += std::fabs(term);
      }
      ASSERT_NEAR(dx[size_t(t * H + h)], sum, 1e-5 * mag + 1e-30) << "dx t " << t << " h " << h;
    }
  for (int64_t h = 0; h < H; ++h)
    for (int64_t e = 0; e < E; ++e) {
      double sum = 0.0, mag = 0.0;
      for (int64_t t = 0; t < T; ++t) {
        const double term = double(x[size_t(t * H + h)]) * double(dl[size_t(t * E + e)]);
        sum += term;
        mag += std::fabs(term);
      }
      ASSERT_NEAR(dw[size_t(h * E + e)], sum, 1e-5 * mag + 1e-30) << "dw h " << h << " e " << e;
    }
}

TEST(RouterGradsCuda, MatchFloat64Products) {
  MOE_REQUIRE_GPU();
  for (DType dtype : {DType::kBf16, DType::kFp32}) {
    expect_router_grads_match_fp64(dtype, 256, 96, 64);  // DeepSeek-V3-like: E 256 is larger
    expect_router_grads_match_fp64(dtype, 200, 72, 8);   // Mixtral's 8 experts, odd T
  }
}

}  // namespace
}  // namespace moe::test
