#pragma once
// Comparing a backend's tensors with the reference: rel_l2 = ||got - ref|| / ||ref|| and max abs
// error, over the whole world (partial sums all-reduced), with MATH.md's tolerances.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/bounded_wait.h"
#include "core/workload.h"

namespace moe {

struct TensorCheck {
  std::string name;
  int64_t count = 0;  // elements compared, over the world
  double rel_l2 = 0;
  double max_abs = 0;     // max |got - ref|
  double ref_norm = 0;    // ||ref||
  double tol = 0;         // rel_l2 tolerance
  int64_t nonfinite = 0;  // NaN or Inf in got
  bool pass = false;
  // With FP8 expert GEMMs, for information: rel_l2 against the same step's reference without
  // quantization (what FP8 costs in accuracy); -1 where not computed.
  double rel_l2_unquantized = -1;
};

struct RoutingCheck {
  int64_t tokens = 0, mismatches = 0, near_ties = 0;
  int64_t drop_mismatches = 0, drop_near_ties = 0;  // capacity drops, in rows
  bool pass = false;
};

// fp8_tensor: the per-tensor scales of the operands the step computes that the backend reported,
// and those the reference took at a near tie (core/fp8_scales.h); reported -1 without
// fp8_tensor.
struct Fp8ScaleTiesCheck {
  int64_t reported = -1, adopted = 0;
  double adopted_max_rel = 0;  // the largest |got / own - 1| taken
};

struct CheckResult {
  int64_t step = 0;
  std::string reference;  // the reference math: "cpu float64" or "gpu fp32"
  // Wall time of the reference (with FP8, both: quantized and not), slowest rank.
  double reference_seconds = 0;
  std::vector<TensorCheck> tensors;
  RoutingCheck routing;
  Fp8ScaleTiesCheck fp8_scales;
  bool pass = false;  // every tensor and the routing passed
};

// MATH.md: bf16 data 1e-2 for "out" and "dx" (and the scalar losses), 2e-2 for weight gradients
// ("dw_*"); fp32 data 1e-5 for all.
double tolerance_for(const std::string& tensor_name, DType dtype);

// One rank's part of a comparison, added to piece by piece: a tensor too large to hold whole in
// float64 (the reference's expert weight gradients) is compared one expert at a time.
struct TensorSums {
  double diff_sq = 0;     // sum (got - ref)^2 over finite pairs
  double ref_sq = 0;      // sum ref^2 over finite pairs
  double max_abs = 0;     // max |got - ref| over finite pairs
  int64_t nonfinite = 0;  // pairs with NaN or Inf on either side (left out of the sums)
  int64_t count = 0;      // pairs seen
  void add(const float* got, const double* ref, int64_t n);
};

// The world's verdict from every rank's sums. Collective over `comm`; its reductions wait at most
// timeout_s for the other ranks (core/bounded_wait.h).
TensorCheck finish_compare(const std::string& name, const TensorSums& mine, double tol,
                           MPI_Comm comm, double timeout_s = kDefaultWaitBoundS);

// Every rank passes its local part (n may differ per rank); the result is the world's, identical
// on every rank. Collective over `comm`.
TensorCheck compare_tensor(const std::string& name, const float* got, const double* ref, int64_t n,
                           double tol, MPI_Comm comm, double timeout_s = kDefaultWaitBoundS);
// For a tensor every rank holds whole (the same n values on every rank): each rank compares its
// 1/world of it, so that every element counts once and the work is shared. Collective over comm.
TensorCheck compare_replicated(const std::string& name, const std::vector<float>& got,
                               const std::vector<double>& ref, double tol, MPI_Comm comm,
                               double timeout_s = kDefaultWaitBoundS);
// For a global scalar that every rank holds: rel error |got-ref| / |ref| (abs error when ref is
// 0).
TensorCheck compare_scalar(const std::string& name, double got, double ref, double tol);

// The loss, L = <out, dout> + aux + z, is assembled on the host from tensors that have their own
// checks. Its error must be what theirs explain: |dL| <= bound = ||d out|| * ||dout|| + |d aux| +
// |d z| (Cauchy-Schwarz), with float64 rounding on top (1e-12 of `scale`, the size of its terms).
// Unlike a tolerance on |L|, this holds however much <out, dout> cancels, and fails when the loss
// is put together wrongly. Reported: rel_l2 = |dL| / |L|, tol = bound / |L|.
TensorCheck compare_loss(double got, double ref, double bound, double scale);

}  // namespace moe
