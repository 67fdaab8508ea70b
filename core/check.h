#pragma once
// Comparing a backend's tensors with the reference: rel_l2 = ||got - ref|| / ||ref|| and max abs
// error, over the whole world (partial sums all-reduced), with MATH.md's tolerances.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

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
};

struct RoutingCheck {
  int64_t tokens = 0, mismatches = 0, near_ties = 0;
  int64_t drop_mismatches = 0, drop_near_ties = 0;  // capacity drops, in rows
  bool pass = false;
};

struct CheckResult {
  int64_t step = 0;
  std::string reference;         // the reference math: "cpu float64" or "gpu fp32"
  double reference_seconds = 0;  // wall time of the reference, slowest rank
  std::vector<TensorCheck> tensors;
  RoutingCheck routing;
  bool pass = false;  // every tensor and the routing passed
};

// MATH.md: bf16 data 1e-2 for "out" and "dx" (and the scalar losses), 2e-2 for weight gradients
// ("dw_*"); fp32 data 1e-5 for all.
double tolerance_for(const std::string& tensor_name, DType dtype);

// Every rank passes its local part (n may differ per rank); the result is the world's, identical
// on every rank. Collective over `comm`.
TensorCheck compare_tensor(const std::string& name, const float* got, const double* ref, int64_t n,
                           double tol, MPI_Comm comm);
// For a global scalar that every rank holds: rel error |got-ref| / max(|ref|, scale) (abs error
// when both are 0). A sum with cancellation (the loss <out, dout>) passes its scale: the size of
// its terms, against which the rounding of the terms is measured.
TensorCheck compare_scalar(const std::string& name, double got, double ref, double tol,
                           double scale = 0.0);

}  // namespace moe
