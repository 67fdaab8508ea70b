// The CPU gemm against a float64 loop written here, on seeded random data: every trans
// combination, accumulate, fp32 and bf16 output, K == 0, odd sizes; plus one timing line.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "core/workload.h"
#include "kernels/cpu/gemm.h"

namespace moe {
namespace {

struct Shape {
  int64_t M, N, K;
};

// Odd sizes around the kernel's 4 x 16 tile and 64-row block, and single rows / columns.
const Shape kShapes[] = {{1, 1, 1},   {3, 17, 5},    {17, 3, 33},  {5, 130, 7},
                         {33, 19, 1}, {64, 48, 100}, {67, 33, 65}, {129, 16, 300}};

std::vector<float> random_floats(std::mt19937_64& rng, int64_t n) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Element (i, k) of op(A) and (k, j) of op(B), as gemm.h defines them.
float op_a(const std::vector<float>& A, bool trans_a, const Shape& s, int64_t i, int64_t k) {
  return trans_a ? A[k * s.M + i] : A[i * s.K + k];
}
float op_b(const std::vector<float>& B, bool trans_b, const Shape& s, int64_t k, int64_t j) {
  return trans_b ? B[j * s.K + k] : B[k * s.N + j];
}

// ref = (C0 +) op(A) @ op(B) in float64, and bound = sum_k |a b| (+ |C0|), the scale of the
// fp32 rounding error of each entry.
void naive_gemm(bool trans_a, bool trans_b, const Shape& s, const std::vector<float>& A,
                const std::vector<float>& B, const std::vector<float>& C0, bool accumulate,
                std::vector<double>& ref, std::vector<double>& bound) {
  ref.assign(s.M * s.N, 0.0);
  bound.assign(s.M * s.N, 0.0);
  for (int64_t i = 0; i < s.M; i++) {
    for (int64_t j = 0; j < s.N; j++) {
      double sum = accumulate ? C0[i * s.N + j] : 0.0;
      double abs_sum = std::fabs(sum);
      for (int64_t k = 0; k < s.K; k++) {
        double prod = double(op_a(A, trans_a, s, i, k)) * double(op_b(B, trans_b, s, k, j));
        sum += prod;
        abs_sum += std::fabs(prod);
      }
      ref[i * s.N + j] = sum;
      bound[i * s.N + j] = abs_sum;
    }
  }
}

// Distance between adjacent bf16 values around v.
float bf16_ulp(float v) {
  int e = 0;
  std::frexp(std::fabs(v) > 0 ? v : 1e-30f, &e);
  return std::ldexp(1.0f, e - 8);
}

bool is_bf16(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return (u & 0xffffu) == 0;
}

TEST(GemmTest, AllTransCombinationsFp32) {
  std::mt19937_64 rng(11);
  for (const Shape& s : kShapes) {
    for (int variant = 0; variant < 8; variant++) {
      bool trans_a = variant & 1, trans_b = variant & 2, accumulate = variant & 4;
      std::vector<float> A = random_floats(rng, s.M * s.K), B = random_floats(rng, s.K * s.N);
      std::vector<float> C0 = random_floats(rng, s.M * s.N), C = C0;
      cpu::gemm(trans_a, trans_b, s.M, s.N, s.K, A.data(), B.data(), C.data(), accumulate,
                DType::kFp32);
      std::vector<double> ref, bound;
      naive_gemm(trans_a, trans_b, s, A, B, C0, accumulate, ref, bound);
      int bad = 0;
      for (int64_t i = 0; i < s.M * s.N; i++) {
        if (std::fabs(C[i] - ref[i]) > 1e-5 * bound[i] && bad++ < 5) {
          ADD_FAILURE() << "M=" << s.M << " N=" << s.N << " K=" << s.K << " ta=" << trans_a
                        << " tb=" << trans_b << " acc=" << accumulate << " at " << i << ": got "
                        << C[i] << " want " << ref[i];
        }
      }
    }
  }
}

TEST(GemmTest, AllTransCombinationsBf16Output) {
  std::mt19937_64 rng(12);
  for (const Shape& s : kShapes) {
    for (int variant = 0; variant < 8; variant++) {
      bool trans_a = variant & 1, trans_b = variant & 2, accumulate = variant & 4;
      std::vector<float> A = random_floats(rng, s.M * s.K), B = random_floats(rng, s.K * s.N);
      std::vector<float> C0 = random_floats(rng, s.M * s.N);
      for (auto& v : C0) v = round_to_bf16(v);  // a bf16 tensor being accumulated into
      std::vector<float> C = C0;
      cpu::gemm(trans_a, trans_b, s.M, s.N, s.K, A.data(), B.data(), C.data(), accumulate,
                DType::kBf16);
      std::vector<double> ref, bound;
      naive_gemm(trans_a, trans_b, s, A, B, C0, accumulate, ref, bound);
      int bad = 0;
      for (int64_t i = 0; i < s.M * s.N; i++) {
        // Rounded once: within one bf16 ulp of the exact sum's bf16 rounding (the fp32 sum may
        // sit on the other side of a rounding boundary), and exactly representable.
        float want = round_to_bf16(float(ref[i]));
        bool ok = is_bf16(C[i]) && std::fabs(C[i] - want) <= bf16_ulp(want);
        if (!ok && bad++ < 5) {
          ADD_FAILURE() << "M=" << s.M << " N=" << s.N << " K=" << s.K << " ta=" << trans_a
                        << " tb=" << trans_b << " acc=" << accumulate << " at " << i << ": got "
                        << C[i] << " want " << want;
        }
      }
    }
  }
}

// The kernel packs both operands before the same inner loop, so the summation order, and thus
// every bit of the result, does not depend on the operands' layout.
TEST(GemmTest, LayoutDoesNotChangeBits) {
  std::mt19937_64 rng(13);
  Shape s{37, 45, 71};
  std::vector<float> A = random_floats(rng, s.M * s.K), B = random_floats(rng, s.K * s.N);
  std::vector<float> At(s.K * s.M), Bt(s.N * s.K);
  for (int64_t i = 0; i < s.M; i++) {
    for (int64_t k = 0; k < s.K; k++) At[k * s.M + i] = A[i * s.K + k];
  }
  for (int64_t k = 0; k < s.K; k++) {
    for (int64_t j = 0; j < s.N; j++) Bt[j * s.K + k] = B[k * s.N + j];
  }
  std::vector<float> nn(s.M * s.N);
  cpu::gemm(false, false, s.M, s.N, s.K, A.data(), B.data(), nn.data(), false, DType::kFp32);
  for (int variant = 1; variant < 4; variant++) {
    bool trans_a = variant & 1, trans_b = variant & 2;
    std::vector<float> C(s.M * s.N);
    cpu::gemm(trans_a, trans_b, s.M, s.N, s.K, trans_a ? At.data() : A.data(),
              trans_b ? Bt.data() : B.data(), C.data(), false, DType::kFp32);
    EXPECT_EQ(std::memcmp(C.data(), nn.data(), sizeof(float) * C.size()), 0)
        << "ta=" << trans_a << " tb=" << trans_b;
  }
}

TEST(GemmTest, KZeroGivesZerosOrLeavesC) {
  std::vector<float> C = {1.5f, -2.0f, 3.25f, 7.0f, 0.1f, -0.3f};
  const std::vector<float> C0 = C;
  for (DType dt : {DType::kFp32, DType::kBf16}) {
    std::vector<float> got = C0;
    cpu::gemm(false, true, 2, 3, 0, nullptr, nullptr, got.data(), true, dt);
    EXPECT_EQ(got, C0) << int(dt);  // unchanged, not even rounded
    cpu::gemm(true, false, 2, 3, 0, nullptr, nullptr, got.data(), false, dt);
    EXPECT_EQ(got, std::vector<float>(6, 0.0f)) << int(dt);
  }
  // M == 0 or N == 0: nothing to write.
  cpu::gemm(false, false, 0, 3, 4, nullptr, nullptr, nullptr, false, DType::kFp32);
  cpu::gemm(false, false, 3, 0, 4, nullptr, nullptr, nullptr, false, DType::kFp32);
}

TEST(GemmTest, StoreAs) {
  EXPECT_EQ(cpu::store_as(DType::kFp32, 1.0f + 1e-6f), 1.0f + 1e-6f);
  EXPECT_EQ(cpu::store_as(DType::kBf16, 1.0f + 1e-6f), 1.0f);
  EXPECT_EQ(cpu::store_as(DType::kBf16, 3.14159f), round_to_bf16(3.14159f));
}

// Not a check: one timing line for the log, at the size of a small expert GEMM.
TEST(GemmTest, Timing512x1024x1024) {
  const int64_t M = 512, N = 1024, K = 1024;
  std::mt19937_64 rng(14);
  std::vector<float> A = random_floats(rng, M * K), B = random_floats(rng, K * N), C(M * N);
  double best = 1e30;
  for (int rep = 0; rep < 3; rep++) {
    auto t0 = std::chrono::steady_clock::now();
    cpu::gemm(false, false, M, N, K, A.data(), B.data(), C.data(), false, DType::kBf16);
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  std::printf("[ gemm     ] 512x1024x1024 NN bf16 out: %.2f ms, %.1f GFLOP/s\n", best * 1e3,
              2.0 * M * N * K / best / 1e9);
}

}  // namespace
}  // namespace moe
