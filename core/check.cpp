// Comparing against the reference: partial sums per rank, all-reduced, so that rel_l2 is the
// world's whole tensor's and every rank reaches the same verdict.
#include "core/check.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"

namespace moe {

double tolerance_for(const std::string& tensor_name, DType dtype) {
  if (dtype == DType::kFp32) return 1e-5;
  // bf16: weight gradients sum over many tokens in bf16-rounded products, hence the looser bound.
  if (tensor_name.rfind("dw", 0) == 0) return 2e-2;
  return 1e-2;
}

void TensorSums::add(const float* got, const double* ref, int64_t n) {
  // Non-finite pairs are counted and left out of the sums, so that rel_l2 still describes the
  // rest; any of them fails the check. A non-finite reference value counts too (never expected).
  // Fixed chunks of 1M pairs, summed by as many threads as there are and added up in chunk order,
  // so that the sums do not depend on the thread count (one expert's DeepSeek-V3 gradients are
  // 44M pairs, compared twice in FP8: serial, a fifth of the check's time). Locals, not the
  // members, carry each chunk's sums: ref may alias them as far as the compiler knows, and stores
  // through `this` made the loop ~10x slower.
  constexpr int64_t kChunk = int64_t(1) << 20;
  struct Part {
    double diff = 0, refs = 0, most = 0;
    int64_t bad = 0;
  };
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<Part> parts(chunks);
  for_each_part(chunks, part_count_of_units(chunks, n, kChunk), [&](int, int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double diff = 0, refs = 0, most = 0;
      int64_t bad = 0;
      for (int64_t i = c * kChunk, end = std::min(n, i + kChunk); i < end; ++i) {
        const double g = got[i], r = ref[i];
        if (!std::isfinite(g) || !std::isfinite(r)) {
          ++bad;
          continue;
        }
        const double d = std::fabs(g - r);
        diff += d * d;
        refs += r * r;
        if (d > most) most = d;  // both finite: no NaN rule needed, and no libm call
      }
      parts[c] = {diff, refs, most, bad};
    }
  });
  for (const Part& p : parts) {
    diff_sq += p.diff;
    ref_sq += p.refs;
    max_abs = std::max(max_abs, p.most);
    nonfinite += p.bad;
  }
  count += n;
}

TensorCheck finish_compare(const std::string& name, const TensorSums& mine, double tol,
                           MPI_Comm comm, double timeout_s) {
  double sums[2] = {mine.diff_sq, mine.ref_sq};
  double max_abs = mine.max_abs;
  int64_t counts[2] = {mine.nonfinite, mine.count};
  const std::string what = "the check's sums of " + name;
  allreduce_bounded(sums, 2, MPI_DOUBLE, MPI_SUM, comm, what.c_str(), timeout_s);
  allreduce_bounded(&max_abs, 1, MPI_DOUBLE, MPI_MAX, comm, what.c_str(), timeout_s);
  allreduce_bounded(counts, 2, MPI_INT64_T, MPI_SUM, comm, what.c_str(), timeout_s);

  TensorCheck c;
  c.name = name;
  c.count = counts[1];
  c.nonfinite = counts[0];
  c.max_abs = max_abs;
  c.ref_norm = std::sqrt(sums[1]);
  // An all-zero reference: fall back to the absolute norm, so only a near-zero result passes.
  c.rel_l2 = sums[1] > 0 ? std::sqrt(sums[0] / sums[1]) : std::sqrt(sums[0]);
  c.tol = tol;
  c.pass = c.nonfinite == 0 && c.rel_l2 <= tol;
  return c;
}

TensorCheck compare_tensor(const std::string& name, const float* got, const double* ref, int64_t n,
                           double tol, MPI_Comm comm, double timeout_s) {
  TensorSums sums;
  sums.add(got, ref, n);
  return finish_compare(name, sums, tol, comm, timeout_s);
}

TensorCheck compare_replicated(const std::string& name, const std::vector<float>& got,
                               const std::vector<double>& ref, double tol, MPI_Comm comm,
                               double timeout_s) {
  const int64_t n = int64_t(ref.size());
  MOE_CHECK(int64_t(got.size()) == n, name << ": " << got.size() << " values against " << n);
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  const int64_t begin = n * rank / size, end = n * (rank + 1) / size;
  return compare_tensor(name, got.data() + begin, ref.data() + begin, end - begin, tol, comm,
                        timeout_s);
}

TensorCheck compare_scalar(const std::string& name, double got, double ref, double tol) {
  TensorCheck c;
  c.name = name;
  c.count = 1;
  c.tol = tol;
  c.ref_norm = std::fabs(ref);
  if (!std::isfinite(got) || !std::isfinite(ref)) {
    c.nonfinite = 1;
    c.rel_l2 = NAN;
    c.max_abs = NAN;
    c.pass = false;
    return c;
  }
  c.max_abs = std::fabs(got - ref);
  c.rel_l2 = c.ref_norm != 0 ? c.max_abs / c.ref_norm : c.max_abs;
  c.pass = c.rel_l2 <= tol;
  return c;
}

TensorCheck compare_loss(double got, double ref, double bound, double scale) {
  TensorCheck c = compare_scalar("loss", got, ref, 0.0);
  if (c.nonfinite) return c;
  const double allowed = bound + 1e-12 * scale;
  c.tol = c.ref_norm != 0 ? allowed / c.ref_norm : allowed;
  c.pass = std::isfinite(allowed) && c.max_abs <= allowed;
  return c;
}

}  // namespace moe
