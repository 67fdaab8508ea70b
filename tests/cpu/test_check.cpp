// compare_tensor / compare_scalar on known vectors, non-finite values, and the tolerance table.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"

namespace moe {
namespace {

TEST(CheckTensor, KnownVectors) {
  const std::vector<float> got = {1.0f, 2.0f, 3.0f, -4.5f};
  const std::vector<double> ref = {1.0, 2.0, 4.0, -4.0};
  TensorCheck c = compare_tensor("dx", got.data(), ref.data(), 4, 0.5, MPI_COMM_WORLD);
  EXPECT_EQ(c.name, "dx");
  EXPECT_EQ(c.count, 4);
  EXPECT_EQ(c.nonfinite, 0);
  // diff^2 = 1 + 0.25, ref^2 = 1 + 4 + 16 + 16.
  EXPECT_NEAR(c.rel_l2, std::sqrt(1.25 / 37.0), 1e-15);
  EXPECT_NEAR(c.ref_norm, std::sqrt(37.0), 1e-15);
  EXPECT_DOUBLE_EQ(c.max_abs, 1.0);
  EXPECT_DOUBLE_EQ(c.tol, 0.5);
  EXPECT_TRUE(c.pass);
  c = compare_tensor("dx", got.data(), ref.data(), 4, 0.1, MPI_COMM_WORLD);
  EXPECT_FALSE(c.pass);
}

// The check's expert gradients come one expert at a time: sums added piece by piece, a NaN in
// one piece included, give the verdict of the whole.
TEST(CheckTensor, SumsAddedInPiecesAreTheWhole) {
  const std::vector<float> got = {1.0f, 2.0f, std::nanf(""), 3.0f, -4.5f, 0.5f};
  const std::vector<double> ref = {1.0, 2.5, 7.0, 4.0, -4.0, 0.0};
  const TensorCheck whole = compare_tensor("dw_in", got.data(), ref.data(), 6, 0.5, MPI_COMM_WORLD);
  TensorSums sums;
  sums.add(got.data(), ref.data(), 2);
  sums.add(got.data() + 2, ref.data() + 2, 0);
  sums.add(got.data() + 2, ref.data() + 2, 3);
  sums.add(got.data() + 5, ref.data() + 5, 1);
  const TensorCheck pieces = finish_compare("dw_in", sums, 0.5, MPI_COMM_WORLD);
  EXPECT_EQ(pieces.count, 6);
  EXPECT_EQ(pieces.nonfinite, 1);
  EXPECT_EQ(pieces.count, whole.count);
  EXPECT_EQ(pieces.nonfinite, whole.nonfinite);
  EXPECT_DOUBLE_EQ(pieces.rel_l2, whole.rel_l2);
  EXPECT_DOUBLE_EQ(pieces.max_abs, 1.0);
  EXPECT_DOUBLE_EQ(pieces.max_abs, whole.max_abs);
  EXPECT_FALSE(pieces.pass);  // the NaN
}

// Millions of pairs are summed in fixed chunks by threads: the same sums with one thread or
// several, a NaN and the largest difference counted wherever their chunk lands.
TEST(CheckTensor, SumsDoNotDependOnTheThreadCount) {
  const int64_t n = 3 * (int64_t(1) << 20) + 12345;
  std::vector<float> got(n);
  std::vector<double> ref(n);
  for (int64_t i = 0; i < n; ++i) {
    ref[i] = std::sin(double(i));
    got[i] = float(ref[i] + 1e-3 * std::cos(double(3 * i)));
  }
  got[1500000] = std::nanf("");
  got[n - 2] = float(ref[n - 2] + 0.5);
  TensorSums one, many;
  max_parts() = 1;
  one.add(got.data(), ref.data(), n);
  max_parts() = 3;
  many.add(got.data(), ref.data(), n);
  max_parts() = 0;
  EXPECT_EQ(one.diff_sq, many.diff_sq);
  EXPECT_EQ(one.ref_sq, many.ref_sq);
  EXPECT_EQ(many.nonfinite, 1);
  EXPECT_EQ(many.count, n);
  EXPECT_NEAR(many.max_abs, 0.5, 1e-6);
  EXPECT_EQ(one.max_abs, many.max_abs);
  EXPECT_NEAR(many.ref_sq, 0.5 * double(n), 0.01 * double(n));
}

TEST(CheckTensor, ExactMatchPasses) {
  const std::vector<float> got = {0.5f, -0.25f};
  const std::vector<double> ref = {0.5, -0.25};
  TensorCheck c = compare_tensor("out", got.data(), ref.data(), 2, 1e-5, MPI_COMM_WORLD);
  EXPECT_EQ(c.rel_l2, 0.0);
  EXPECT_EQ(c.max_abs, 0.0);
  EXPECT_TRUE(c.pass);
}

TEST(CheckTensor, NonFiniteFails) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<double> ref = {1.0, 2.0, 3.0};
  for (float bad : {nan, inf, -inf}) {
    const std::vector<float> got = {1.0f, bad, 3.0f};
    TensorCheck c = compare_tensor("out", got.data(), ref.data(), 3, 1.0, MPI_COMM_WORLD);
    EXPECT_EQ(c.nonfinite, 1);
    EXPECT_FALSE(c.pass);
    // The finite rest still reports its own error.
    EXPECT_EQ(c.rel_l2, 0.0);
  }
}

TEST(CheckTensor, ZeroReferenceUsesAbsoluteNorm) {
  const std::vector<double> ref = {0.0, 0.0};
  const std::vector<float> tiny = {1e-7f, 0.0f};
  TensorCheck c = compare_tensor("dw_in", tiny.data(), ref.data(), 2, 1e-5, MPI_COMM_WORLD);
  EXPECT_NEAR(c.rel_l2, 1e-7, 1e-13);
  EXPECT_TRUE(c.pass);
  const std::vector<float> big = {0.3f, 0.4f};
  c = compare_tensor("dw_in", big.data(), ref.data(), 2, 1e-2, MPI_COMM_WORLD);
  EXPECT_NEAR(c.rel_l2, 0.5, 1e-7);
  EXPECT_FALSE(c.pass);
}

TEST(CheckTensor, EmptyLocalPart) {
  TensorCheck c = compare_tensor("dx", nullptr, nullptr, 0, 1e-2, MPI_COMM_WORLD);
  EXPECT_EQ(c.count, 0);
  EXPECT_TRUE(c.pass);
}

TEST(CheckScalar, RelativeAndAbsolute) {
  TensorCheck c = compare_scalar("loss", 101.0, 100.0, 1e-2);
  EXPECT_NEAR(c.rel_l2, 0.01, 1e-15);
  EXPECT_DOUBLE_EQ(c.max_abs, 1.0);
  EXPECT_EQ(c.count, 1);
  EXPECT_TRUE(c.pass);
  c = compare_scalar("loss", 102.0, 100.0, 1e-2);
  EXPECT_FALSE(c.pass);
  c = compare_scalar("aux", 1e-6, 0.0, 1e-5);
  EXPECT_NEAR(c.rel_l2, 1e-6, 1e-20);
  EXPECT_TRUE(c.pass);
  c = compare_scalar("z", -3.0, -3.0, 0.0);
  EXPECT_TRUE(c.pass);
}

// The loss passes exactly when its error is within what out, aux and z explain, however small
// |L| is; it fails beyond that bound even when the error is tiny relative to |L|.
TEST(CheckLoss, BoundFromTheComponents) {
  TensorCheck c = compare_loss(0.5, 0.1, 0.4, 100.0);  // cancelling: |dL| = 4 |L|, explained
  EXPECT_DOUBLE_EQ(c.max_abs, 0.4);
  EXPECT_TRUE(c.pass);
  EXPECT_NEAR(c.tol, 4.0 + 1e-9, 1e-12);
  c = compare_loss(0.6, 0.1, 0.4, 100.0);  // 0.1 more than explained
  EXPECT_FALSE(c.pass);
  c = compare_loss(100.001, 100.0, 0.0, 100.0);  // 1e-5 relative, but nothing explains it
  EXPECT_FALSE(c.pass);
  c = compare_loss(100.0 + 1e-11, 100.0, 0.0, 100.0);  // float64 rounding of the sums
  EXPECT_TRUE(c.pass);
  c = compare_loss(1.0, 1.0, NAN, 1.0);
  EXPECT_FALSE(c.pass);
  c = compare_loss(INFINITY, 1.0, 1.0, 1.0);
  EXPECT_EQ(c.nonfinite, 1);
  EXPECT_FALSE(c.pass);
}

TEST(CheckScalar, NonFiniteFails) {
  TensorCheck c = compare_scalar("loss", std::nan(""), 1.0, 1.0);
  EXPECT_EQ(c.nonfinite, 1);
  EXPECT_FALSE(c.pass);
  c = compare_scalar("loss", INFINITY, 1.0, 1.0);
  EXPECT_EQ(c.nonfinite, 1);
  EXPECT_FALSE(c.pass);
}

TEST(CheckTolerance, Table) {
  EXPECT_EQ(tolerance_for("out", DType::kBf16), 1e-2);
  EXPECT_EQ(tolerance_for("dx", DType::kBf16), 1e-2);
  EXPECT_EQ(tolerance_for("loss", DType::kBf16), 1e-2);
  EXPECT_EQ(tolerance_for("dw_gate", DType::kBf16), 2e-2);
  EXPECT_EQ(tolerance_for("dw_in", DType::kBf16), 2e-2);
  EXPECT_EQ(tolerance_for("dw_out", DType::kBf16), 2e-2);
  for (const char* name : {"out", "dx", "loss", "dw_gate", "dw_in", "dw_out"})
    EXPECT_EQ(tolerance_for(name, DType::kFp32), 1e-5) << name;
}

}  // namespace
}  // namespace moe
