#pragma once
// Helpers for GPU tests: skip without a GPU, device buffers from host vectors, comparisons.
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "core/workload.h"
#include "kernels/cuda/grouped_gemm.h"

namespace moe::test {

// Empty when a GPU is usable, else the reason to skip.
inline std::string gpu_unavailable_reason() {
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) return std::string("no usable GPU: ") + cudaGetErrorString(rc);
  if (n == 0) return "no GPU visible";
  return "";
}

#define MOE_REQUIRE_GPU()                                                  \
  do {                                                                     \
    const std::string moe_reason_ = ::moe::test::gpu_unavailable_reason(); \
    if (!moe_reason_.empty()) GTEST_SKIP() << "skipped: " << moe_reason_;  \
  } while (0)

// Skips where the grouped sm90 GEMM cannot run (no GPU, or not an H100/H200).
#define MOE_REQUIRE_SM90()                                     \
  do {                                                         \
    MOE_REQUIRE_GPU();                                         \
    if (!::moe::cuda::GroupedGemm::runs_on_current_device())   \
      GTEST_SKIP() << "skipped: not an sm_90 GPU (H100/H200)"; \
  } while (0)

// The value of an e4m3 code (an __nv_fp8_e4m3's bits), by CUDA's own conversion.
inline float e4m3_value(uint8_t code) {
  __nv_fp8_e4m3 f;
  f.__x = code;
  return float(f);
}

// A device buffer owned by a test.
template <class T>
struct DevBuf {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t count) : n(count) {
    CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(1, n) * sizeof(T)));
    CUDA_CHECK(cudaMemset(ptr, 0, std::max<size_t>(1, n) * sizeof(T)));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  // Synchronized after the copy: a copy from pageable memory may still be landing when
  // cudaMemcpy returns, and a kernel on a non-blocking test stream does not wait for it (a
  // permute test read its NaN-filled output's fill over the kernel's rows on a busy GPU).
  explicit DevBuf(const std::vector<T>& host) : DevBuf(host.size()) {
    CUDA_CHECK(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  ~DevBuf() { cudaFree(ptr); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  std::vector<T> host() const {
    std::vector<T> v(n);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(v.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
};

// Storage tensors: host floats (already rounded to dtype) <-> device bf16/fp32 bytes.
inline std::vector<uint16_t> to_bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = float_to_bf16_bits(v[i]);
  return b;
}

// `v` with `shift` (0 or 1) spare zeros before it and 1 - shift after: one buffer size, the same
// values at an aligned or a one-element-unaligned base.
inline std::vector<float> shifted_by(const std::vector<float>& v, int shift) {
  std::vector<float> out(v.size() + 1, 0.0f);
  std::copy(v.begin(), v.end(), out.begin() + shift);
  return out;
}

struct StorageBuf {
  DType dtype;
  int64_t n;
  void* ptr = nullptr;
  StorageBuf(DType d, const std::vector<float>& host) : dtype(d), n(int64_t(host.size())) {
    const size_t eb = dtype == DType::kBf16 ? 2 : 4;
    CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(1, n) * eb));
    if (dtype == DType::kBf16) {
      std::vector<uint16_t> b = to_bf16_bits(host);
      CUDA_CHECK(cudaMemcpy(ptr, b.data(), n * 2, cudaMemcpyHostToDevice));
    } else {
      CUDA_CHECK(cudaMemcpy(ptr, host.data(), n * 4, cudaMemcpyHostToDevice));
    }
    CUDA_CHECK(cudaDeviceSynchronize());  // as DevBuf's
  }
  StorageBuf(DType d, int64_t count) : StorageBuf(d, std::vector<float>(count, 0.0f)) {}
  ~StorageBuf() { cudaFree(ptr); }
  StorageBuf(const StorageBuf&) = delete;
  StorageBuf& operator=(const StorageBuf&) = delete;
  std::vector<float> host() const {
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> v(n);
    if (dtype == DType::kBf16) {
      std::vector<uint16_t> b(n);
      CUDA_CHECK(cudaMemcpy(b.data(), ptr, n * 2, cudaMemcpyDeviceToHost));
      for (int64_t i = 0; i < n; ++i) v[i] = bf16_bits_to_float(b[i]);
    } else {
      CUDA_CHECK(cudaMemcpy(v.data(), ptr, n * 4, cudaMemcpyDeviceToHost));
    }
    return v;
  }
};

// The row layouts a row kernel must treat alike: fn(dtype, H, shift, what, values) for bf16 and
// fp32 storage, H 256 (16-byte moves) and 5 (the element loop), and an aligned base or one
// element past it (shift 0, 1), with rows * H seeded values in [-1, 1) already in dtype.
template <class Fn>
void for_each_row_layout(int64_t rows, uint64_t seed, Fn fn) {
  for (DType dtype : {DType::kBf16, DType::kFp32})
    for (int64_t H : {256, 5})
      for (int shift : {0, 1}) {
        const std::string what = std::string(dtype_name(dtype)) + " H " + std::to_string(H) +
                                 " shift " + std::to_string(shift);
        SCOPED_TRACE(what);
        std::mt19937_64 rng(seed++);
        std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
        std::vector<float> values(rows * H);
        for (float& v : values) v = dtype == DType::kBf16 ? round_to_bf16(unit(rng)) : unit(rng);
        fn(dtype, H, shift, what, values);
      }
}

// rel_l2 of got vs want (both float); prints the first mismatches beyond abs_tol when asked.
inline double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double d = 0, r = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    d += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    r += double(want[i]) * want[i];
  }
  return r > 0 ? std::sqrt(d / r) : std::sqrt(d);
}

// Counts elements whose difference exceeds tol_rel * max(1, |want|); prints the first few.
inline int64_t count_mismatches(const std::vector<float>& got, const std::vector<float>& want,
                                double tol_rel, const char* what, int print = 5) {
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::fabs(double(got[i]) - want[i]);
    if (!(diff <= tol_rel * std::max(1.0, std::fabs(double(want[i]))))) {
      if (bad < print)
        std::printf("  %s[%zu]: got %.8g want %.8g\n", what, i, double(got[i]), double(want[i]));
      ++bad;
    }
  }
  return bad;
}

}  // namespace moe::test
