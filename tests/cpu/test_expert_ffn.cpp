// The SwiGLU expert FFN of the CPU backend (swiglu_fwd/bwd, expert_ffn_fwd/bwd) against float64
// loops written here, on seeded random data, in fp32 and bf16; plus finite differences of
// swiglu_bwd. Experts without rows must still get (zero) weight gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/workload.h"
#include "kernels/cpu/expert_ffn.h"
#include "tests/common/expect_close.h"

namespace moe {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int kShow = 8;  // mismatches printed per failed comparison

std::vector<float> random_floats(std::mt19937_64& rng, int64_t n, float scale, bool bf16) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = bf16 ? round_to_bf16(d(rng)) : d(rng);
  return v;
}

double silu(double g) { return g / (1.0 + std::exp(-g)); }
double dsilu(double g) {
  const double s = 1.0 / (1.0 + std::exp(-g));
  return s * (1.0 + g * (1.0 - s));
}

using test::expect_close;

// rel_l2 = ||got - ref|| / ||ref|| < tol over [begin, end), and every value finite. On failure
// prints the first elements whose error exceeds tol times the reference's rms.
void expect_rel_l2(const std::string& what, const std::vector<float>& got,
                   const std::vector<double>& ref, double tol, int64_t begin = 0,
                   int64_t end = -1) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  if (end < 0) end = int64_t(got.size());
  double diff2 = 0, ref2 = 0;
  int64_t nonfinite = 0;
  for (int64_t i = begin; i < end; ++i) {
    if (!std::isfinite(got[i])) ++nonfinite;
    diff2 += (got[i] - ref[i]) * (got[i] - ref[i]);
    ref2 += ref[i] * ref[i];
  }
  const double rel = std::sqrt(diff2 / std::max(ref2, 1e-300));
  if (nonfinite == 0 && rel < tol) return;
  const double rms = std::sqrt(ref2 / double(std::max<int64_t>(end - begin, 1)));
  std::ostringstream os;
  int shown = 0;
  for (int64_t i = begin; i < end && shown < kShow; ++i) {
    const double err = std::fabs(got[i] - ref[i]);
    if (std::isfinite(got[i]) && err <= tol * rms) continue;
    os << "\n  [" << i << "] got " << got[i] << " want " << ref[i];
    ++shown;
  }
  ADD_FAILURE() << what << ": rel_l2 " << rel << " (tol " << tol << "), " << nonfinite
                << " non-finite" << os.str();
}

void expect_all_zero(const std::string& what, const float* v, int64_t n) {
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; ++i)
    if (!(v[i] == 0.0f)) {
      if (first < 0) first = i;
      ++bad;
    }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << n << " entries not zero, first [" << first
                    << "] = " << (first >= 0 ? v[first] : 0.0f);
}

void expect_bf16_representable(const std::string& what, const std::vector<float>& v) {
  int64_t bad = 0;
  for (float x : v) bad += round_to_bf16(x) != x;
  EXPECT_EQ(bad, 0) << what << ": values not representable in bf16";
}

// ---- swiglu ------------------------------------------------------------------------------------

void check_swiglu(DType dtype) {
  const bool bf16 = dtype == DType::kBf16;
  std::mt19937_64 rng(bf16 ? 101 : 102);
  const int64_t n = 9, F = 13;
  const std::vector<float> h = random_floats(rng, n * 2 * F, 4.0f, bf16);
  const std::vector<float> da = random_floats(rng, n * F, 1.0f, bf16);

  std::vector<float> a(n * F, kNaN), dh(n * 2 * F, kNaN);
  cpu::swiglu_fwd(h.data(), n, F, dtype, a.data());
  cpu::swiglu_bwd(da.data(), h.data(), n, F, dtype, dh.data());

  std::vector<double> ref_a(n * F), ref_dh(n * 2 * F), slack_a(n * F, 0.0),
      slack_dh(n * 2 * F, 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < F; ++j) {
      const double g = h[r * 2 * F + j], u = h[r * 2 * F + F + j], d = da[r * F + j];
      ref_a[r * F + j] = silu(g) * u;
      ref_dh[r * 2 * F + j] = d * u * dsilu(g);
      ref_dh[r * 2 * F + F + j] = d * silu(g);
      // silu'(g) = s (1 + g (1 - s)) cancels near g = -1.28: allow fp32 rounding of the terms.
      slack_dh[r * 2 * F + j] = 1e-6 * std::fabs(d * u);
    }
  // fp32: a few ulps of fp32 math; bf16: plus one rounding of the result (1 bf16 ulp relative).
  const double rel = bf16 ? 8e-3 : 1e-5;
  expect_close("a", a, ref_a, rel, slack_a);
  expect_close("dh", dh, ref_dh, rel, slack_dh);
  if (bf16) {
    expect_bf16_representable("a", a);
    expect_bf16_representable("dh", dh);
  }
}

TEST(ExpertFfnSwiglu, Fp32MatchesFloat64) { check_swiglu(DType::kFp32); }
TEST(ExpertFfnSwiglu, Bf16MatchesFloat64) { check_swiglu(DType::kBf16); }

TEST(ExpertFfnSwiglu, BackwardMatchesFiniteDifferences) {
  // L = sum_j c_j a_j with a = swiglu_fwd(h) in fp32; dL/dh = swiglu_bwd(c).
  std::mt19937_64 rng(103);
  const int64_t n = 4, F = 11;
  std::vector<float> h = random_floats(rng, n * 2 * F, 3.0f, false);
  const std::vector<float> c = random_floats(rng, n * F, 1.0f, false);
  std::vector<float> dh(n * 2 * F, kNaN), a(n * F);
  cpu::swiglu_bwd(c.data(), h.data(), n, F, DType::kFp32, dh.data());

  auto loss = [&]() {
    cpu::swiglu_fwd(h.data(), n, F, DType::kFp32, a.data());
    double l = 0;
    for (int64_t i = 0; i < n * F; ++i) l += double(c[i]) * a[i];
    return l;
  };
  const float eps = 1e-2f;
  std::ostringstream os;
  int bad = 0;
  for (int64_t i = 0; i < n * 2 * F; ++i) {
    const float v = h[i];
    h[i] = v + eps;
    const double lp = loss();
    h[i] = v - eps;
    const double lm = loss();
    h[i] = v;
    const double fd = (lp - lm) / (double(v + eps) - double(v - eps));
    if (std::fabs(fd - dh[i]) <= 1e-3 * (1.0 + std::fabs(fd))) continue;
    if (bad++ < kShow) os << "\n  [" << i << "] analytic " << dh[i] << " fd " << fd;
  }
  EXPECT_EQ(bad, 0) << "swiglu_bwd vs finite differences" << os.str();
}

// ---- expert_ffn_fwd / expert_ffn_bwd -----------------------------------------------------------

struct FfnRef {
  std::vector<double> h, a, ye, dxe, dw_in, dw_out;
};

// Float64 per-row loops of the SwiGLU FFN and its backward (MATH.md steps 7 and "Backward").
FfnRef ffn_reference(const std::vector<float>& xe, const std::vector<float>& w_in,
                     const std::vector<float>& w_out, const std::vector<float>& dye,
                     const std::vector<int64_t>& off, int64_t E_local, int64_t H, int64_t F) {
  const int64_t R = off[E_local];
  FfnRef r;
  r.h.assign(R * 2 * F, 0.0);
  r.a.assign(R * F, 0.0);
  r.ye.assign(R * H, 0.0);
  r.dxe.assign(R * H, 0.0);
  r.dw_in.assign(E_local * H * 2 * F, 0.0);
  r.dw_out.assign(E_local * F * H, 0.0);
  std::vector<double> da(F), dh(2 * F);
  for (int64_t l = 0; l < E_local; ++l) {
    const float* wi = w_in.data() + l * H * 2 * F;
    const float* wo = w_out.data() + l * F * H;
    double* dwi = r.dw_in.data() + l * H * 2 * F;
    double* dwo = r.dw_out.data() + l * F * H;
    for (int64_t row = off[l]; row < off[l + 1]; ++row) {
      const float* x = xe.data() + row * H;
      const float* dy = dye.data() + row * H;
      double* h = r.h.data() + row * 2 * F;
      double* a = r.a.data() + row * F;
      for (int64_t j = 0; j < 2 * F; ++j)
        for (int64_t i = 0; i < H; ++i) h[j] += double(x[i]) * wi[i * 2 * F + j];
      for (int64_t j = 0; j < F; ++j) a[j] = silu(h[j]) * h[F + j];
      for (int64_t o = 0; o < H; ++o)
        for (int64_t j = 0; j < F; ++j) r.ye[row * H + o] += a[j] * wo[j * H + o];

      for (int64_t j = 0; j < F; ++j) {
        da[j] = 0;
        for (int64_t o = 0; o < H; ++o) da[j] += double(dy[o]) * wo[j * H + o];
        for (int64_t o = 0; o < H; ++o) dwo[j * H + o] += a[j] * dy[o];
        dh[j] = da[j] * h[F + j] * dsilu(h[j]);
        dh[F + j] = da[j] * silu(h[j]);
      }
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < 2 * F; ++j) {
          r.dxe[row * H + i] += dh[j] * wi[i * 2 * F + j];
          dwi[i * 2 * F + j] += double(x[i]) * dh[j];
        }
    }
  }
  return r;
}

void check_expert_ffn(DType dtype, const std::vector<int64_t>& rows, uint64_t seed) {
  const bool bf16 = dtype == DType::kBf16;
  const int64_t E_local = int64_t(rows.size()), H = 24, F = 20;
  std::vector<int64_t> off(E_local + 1, 0);
  for (int64_t l = 0; l < E_local; ++l) off[l + 1] = off[l] + rows[l];
  const int64_t R = off[E_local];

  std::mt19937_64 rng(seed);
  const std::vector<float> xe = random_floats(rng, R * H, 1.0f, bf16);
  const std::vector<float> w_in =
      random_floats(rng, E_local * H * 2 * F, std::sqrt(3.0f / float(H)), bf16);
  const std::vector<float> w_out =
      random_floats(rng, E_local * F * H, std::sqrt(3.0f / float(F)), bf16);
  const std::vector<float> dye = random_floats(rng, R * H, 1.0f, bf16);

  // Every output starts as NaN: whatever the kernel leaves unwritten shows.
  std::vector<float> h(R * 2 * F, kNaN), a(R * F, kNaN), ye(R * H, kNaN);
  cpu::expert_ffn_fwd(xe.data(), w_in.data(), w_out.data(), off.data(), E_local, H, F, dtype,
                      h.data(), a.data(), ye.data());
  std::vector<float> da(R * F, kNaN), dh(R * 2 * F, kNaN), dxe(R * H, kNaN),
      dw_in(E_local * H * 2 * F, kNaN), dw_out(E_local * F * H, kNaN);
  cpu::expert_ffn_bwd(dye.data(), xe.data(), h.data(), a.data(), w_in.data(), w_out.data(),
                      off.data(), E_local, H, F, dtype, DType::kFp32, da.data(), dh.data(),
                      dxe.data(), dw_in.data(), dw_out.data());

  const FfnRef ref = ffn_reference(xe, w_in, w_out, dye, off, E_local, H, F);
  const double act_tol = bf16 ? 1e-2 : 1e-5, grad_tol = bf16 ? 2e-2 : 1e-5;
  expect_rel_l2("h", h, ref.h, act_tol);
  expect_rel_l2("a", a, ref.a, act_tol);
  expect_rel_l2("ye", ye, ref.ye, act_tol);
  expect_rel_l2("dxe", dxe, ref.dxe, act_tol);
  if (bf16) {
    expect_bf16_representable("ye", ye);
    expect_bf16_representable("dxe", dxe);
  }
  for (int64_t l = 0; l < E_local; ++l) {
    const std::string e = " of local expert " + std::to_string(l);
    if (rows[l] == 0) {
      expect_all_zero("dw_in" + e, dw_in.data() + l * H * 2 * F, H * 2 * F);
      expect_all_zero("dw_out" + e, dw_out.data() + l * F * H, F * H);
    } else {
      expect_rel_l2("dw_in" + e, dw_in, ref.dw_in, grad_tol, l * H * 2 * F, (l + 1) * H * 2 * F);
      expect_rel_l2("dw_out" + e, dw_out, ref.dw_out, grad_tol, l * F * H, (l + 1) * F * H);
    }
  }
}

TEST(ExpertFfn, Fp32WithAnEmptyExpert) { check_expert_ffn(DType::kFp32, {5, 0, 7}, 201); }
TEST(ExpertFfn, Bf16WithAnEmptyExpert) { check_expert_ffn(DType::kBf16, {5, 0, 7}, 202); }

TEST(ExpertFfn, Fp32EmptyFirstAndLastExpertAndManyRows) {
  check_expert_ffn(DType::kFp32, {0, 70, 0}, 203);
}
TEST(ExpertFfn, Bf16EmptyFirstAndLastExpertAndManyRows) {
  check_expert_ffn(DType::kBf16, {0, 70, 0}, 204);
}

TEST(ExpertFfn, NoRowsAtAllGivesZeroWeightGrads) {
  // A rank that received nothing: R = 0, every expert empty.
  const int64_t E_local = 2, H = 8, F = 6;
  const std::vector<int64_t> off(E_local + 1, 0);
  std::vector<float> w_in(E_local * H * 2 * F, 0.5f), w_out(E_local * F * H, 0.5f);
  std::vector<float> dw_in(w_in.size(), kNaN), dw_out(w_out.size(), kNaN);
  for (DType dtype : {DType::kFp32, DType::kBf16}) {
    cpu::expert_ffn_fwd(nullptr, w_in.data(), w_out.data(), off.data(), E_local, H, F, dtype,
                        nullptr, nullptr, nullptr);
    cpu::expert_ffn_bwd(nullptr, nullptr, nullptr, nullptr, w_in.data(), w_out.data(), off.data(),
                        E_local, H, F, dtype, dtype, nullptr, nullptr, nullptr, dw_in.data(),
                        dw_out.data());
    expect_all_zero("dw_in", dw_in.data(), int64_t(dw_in.size()));
    expect_all_zero("dw_out", dw_out.data(), int64_t(dw_out.size()));
  }
}

// expert_grad_dtype bf16: the same fp32 sums, each rounded once to bf16 (dw = round(dw_fp32)
// exactly); dxe does not depend on the gradients' dtype.
TEST(ExpertFfn, Bf16WeightGradsAreTheFp32OnesRounded) {
  const int64_t E_local = 3, H = 16, F = 12, R = 42;
  const std::vector<int64_t> off = {0, 9, 9, 42};
  std::mt19937_64 rng(205);
  const std::vector<float> xe = random_floats(rng, R * H, 1.0f, true);
  const std::vector<float> w_in = random_floats(rng, E_local * H * 2 * F, 0.4f, true);
  const std::vector<float> w_out = random_floats(rng, E_local * F * H, 0.4f, true);
  const std::vector<float> dye = random_floats(rng, R * H, 1.0f, true);
  std::vector<float> h(R * 2 * F), a(R * F), ye(R * H);
  cpu::expert_ffn_fwd(xe.data(), w_in.data(), w_out.data(), off.data(), E_local, H, F, DType::kBf16,
                      h.data(), a.data(), ye.data());
  struct Grads {
    std::vector<float> dxe, dw_in, dw_out;
  };
  auto backward = [&](DType grad_dtype) {
    Grads g{std::vector<float>(R * H, kNaN), std::vector<float>(E_local * H * 2 * F, kNaN),
            std::vector<float>(E_local * F * H, kNaN)};
    std::vector<float> da(R * F), dh(R * 2 * F);
    cpu::expert_ffn_bwd(dye.data(), xe.data(), h.data(), a.data(), w_in.data(), w_out.data(),
                        off.data(), E_local, H, F, DType::kBf16, grad_dtype, da.data(), dh.data(),
                        g.dxe.data(), g.dw_in.data(), g.dw_out.data());
    return g;
  };
  const Grads f = backward(DType::kFp32), b = backward(DType::kBf16);
  EXPECT_EQ(f.dxe, b.dxe);
  int64_t changed = 0;
  for (auto [fp32, bf16] : {std::pair{&f.dw_in, &b.dw_in}, std::pair{&f.dw_out, &b.dw_out}})
    for (size_t i = 0; i < fp32->size(); ++i) {
      ASSERT_EQ((*bf16)[i], round_to_bf16((*fp32)[i])) << "element " << i;
      changed += (*bf16)[i] != (*fp32)[i];
    }
  EXPECT_GT(changed, 0) << "no gradient needed rounding: the test shows nothing";
  expect_all_zero("dw_in of the empty expert", b.dw_in.data() + H * 2 * F, H * 2 * F);
}

// Weight gradients over rows in two calls, the second's added to the first's (accumulate, which
// no step issues since the pipeline gathers its chunks' rows), give one pass's gradients within
// fp32 rounding; an expert with rows in the second chunk only starts from the zeros the first
// wrote, one with rows in the first only keeps them.
TEST(ExpertFfn, WeightGradsAccumulateOverChunks) {
  const int64_t E_local = 3, H = 16, F = 12;
  const std::vector<int64_t> rows_a = {0, 9, 4}, rows_b = {7, 5, 0};
  std::mt19937_64 rng(206);
  const int64_t R = 25;
  const std::vector<float> dye = random_floats(rng, R * H, 1.0f, true);
  const std::vector<float> xe = random_floats(rng, R * H, 1.0f, true);
  const std::vector<float> a = random_floats(rng, R * F, 1.0f, true);
  const std::vector<float> dh = random_floats(rng, R * 2 * F, 1.0f, true);
  // One pass: each expert's rows of both chunks together (a first, then b).
  std::vector<float> dye1, xe1, a1, dh1;
  std::vector<int64_t> off1 = {0}, off_a = {0}, off_b = {0};
  for (int64_t l = 0; l < E_local; ++l) {
    off_a.push_back(off_a.back() + rows_a[l]);
    off_b.push_back(off_b.back() + rows_b[l]);
  }
  auto take = [](std::vector<float>& to, const std::vector<float>& from, int64_t row, int64_t n,
                 int64_t width) {
    to.insert(to.end(), from.begin() + row * width, from.begin() + (row + n) * width);
  };
  const int64_t b0 = off_a[E_local];  // chunk b's rows follow chunk a's in the inputs
  for (int64_t l = 0; l < E_local; ++l) {
    for (auto [row, n] : {std::pair{off_a[l], rows_a[l]}, std::pair{b0 + off_b[l], rows_b[l]}}) {
      take(dye1, dye, row, n, H);
      take(xe1, xe, row, n, H);
      take(a1, a, row, n, F);
      take(dh1, dh, row, n, 2 * F);
    }
    off1.push_back(off1.back() + rows_a[l] + rows_b[l]);
  }
  std::vector<float> want_in(E_local * H * 2 * F), want_out(E_local * F * H);
  cpu::expert_ffn_bwd_weights(dye1.data(), xe1.data(), a1.data(), dh1.data(), off1.data(), E_local,
                              H, F, DType::kFp32, want_in.data(), want_out.data(), false);
  std::vector<float> dw_in(want_in.size(), kNaN), dw_out(want_out.size(), kNaN);
  cpu::expert_ffn_bwd_weights(dye.data(), xe.data(), a.data(), dh.data(), off_a.data(), E_local, H,
                              F, DType::kFp32, dw_in.data(), dw_out.data(), false);
  cpu::expert_ffn_bwd_weights(dye.data() + b0 * H, xe.data() + b0 * H, a.data() + b0 * F,
                              dh.data() + b0 * 2 * F, off_b.data(), E_local, H, F, DType::kFp32,
                              dw_in.data(), dw_out.data(), true);
  for (auto [got, want] : {std::pair{&dw_in, &want_in}, std::pair{&dw_out, &want_out}}) {
    double err = 0, norm = 0;
    for (size_t i = 0; i < want->size(); ++i) {
      err += std::pow(double((*got)[i]) - (*want)[i], 2);
      norm += std::pow(double((*want)[i]), 2);
    }
    EXPECT_LT(std::sqrt(err / norm), 1e-6);  // NaN (an unwritten expert) fails too
  }
}

}  // namespace
}  // namespace moe
