// Which FP8 scale modes cuBLASLt 13.1 takes on Hopper, and in which scale layout: one row-major
// C [M, N] = A [M, K] @ B [N, K]^T (both operands K-major: the only FP8 layout Hopper's cuBLASLt
// runs, "TN"), A quantized as activations (per tensor or 1 x 128 along K), B as weights (per
// tensor, 128 x 128, or 1 x 128), with the quantization of core/fp8.h. For each combination and
// scale-layout guess: whether a heuristic algorithm exists, and the result's rel_l2 against the
// float64 product of the same quantized values (a right layout lands near fp32 rounding, a wrong
// one far off), and the time of one call. Build from the repository root:
//   nvcc -std=c++17 -O2 -arch=sm_90a -I. results/2026-11-25-fp8-cublaslt-probe/probe.cu \
//     core/fp8.cpp -lcublasLt -o /tmp/probe && /tmp/probe
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/fp8.h"

// core/fp8.cpp's one dependency on core/error.cpp (which needs MPI): a check failing aborts.
namespace moe {
[[noreturn]] void throw_error(const char* file, int line, const std::string& what) {
  std::printf("%s:%d: %s\n", file, line, what.c_str());
  std::exit(1);
}
}  // namespace moe

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e = (x);                                                                    \
    if (e != cudaSuccess) {                                                                 \
      std::printf("CUDA %s at %s:%d: %s\n", #x, __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

enum Mode { kScalar, kVec128, kBlk128 };
const char* mode_name(Mode m) {
  return m == kScalar ? "SCALAR_32F" : m == kVec128 ? "VEC128_32F" : "BLK128x128_32F";
}

// X [rows, K] row-major quantized in blocks of br x bc (0 = whole): e4m3 codes, and scales
// [ceil(rows/br), ceil(K/bc)] row-major.
struct Quant {
  std::vector<__nv_fp8_e4m3> q;
  std::vector<float> deq, scales;
  int64_t sr = 1, sc = 1;
};
Quant quantize(const std::vector<float>& X, int64_t rows, int64_t K, int64_t br, int64_t bc) {
  Quant out;
  if (br == 0) br = rows;
  if (bc == 0) bc = K;
  out.sr = (rows + br - 1) / br;
  out.sc = (K + bc - 1) / bc;
  out.q.resize(rows * K);
  out.deq.resize(rows * K);
  out.scales.resize(out.sr * out.sc);
  for (int64_t i = 0; i < out.sr; ++i)
    for (int64_t j = 0; j < out.sc; ++j) {
      float amax = 0;
      for (int64_t r = i * br; r < std::min(rows, (i + 1) * br); ++r)
        for (int64_t c = j * bc; c < std::min(K, (j + 1) * bc); ++c)
          amax = std::max(amax, std::fabs(X[r * K + c]));
      const float s = moe::fp8_scale(amax);
      out.scales[i * out.sc + j] = s;
      for (int64_t r = i * br; r < std::min(rows, (i + 1) * br); ++r)
        for (int64_t c = j * bc; c < std::min(K, (j + 1) * bc); ++c) {
          const float e = moe::e4m3_round(X[r * K + c] / s);
          out.q[r * K + c] = __nv_fp8_e4m3(e);
          out.deq[r * K + c] = s * e;
        }
    }
  return out;
}

// The scales as cuBLASLt is to read them: row-major as quantize made them ("k-inner": an
// operand row's K blocks side by side), or transposed ("rows-inner": one K block's rows, or row
// blocks, side by side).
std::vector<float> scale_layout(const Quant& q, bool transposed) {
  if (!transposed) return q.scales;
  std::vector<float> t(q.scales.size());
  for (int64_t i = 0; i < q.sr; ++i)
    for (int64_t j = 0; j < q.sc; ++j) t[j * q.sr + i] = q.scales[i * q.sc + j];
  return t;
}

template <class T>
T* upload(const std::vector<T>& v) {
  T* d = nullptr;
  CK(cudaMalloc(&d, std::max<size_t>(v.size(), 1) * sizeof(T)));
  CK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

int main() {
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  std::printf("cuBLASLt %zu\n", cublasLtGetVersion());
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{256, 384, 512},
                         {256, 384, 448},
                         {2048, 2048, 2048}}) {
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> A(M * K), B(N * K);
    for (auto& v : A) v = nd(rng) * (1 + 3 * (std::uniform_real_distribution<float>()(rng) < 0.01));
    for (auto& v : B) v = nd(rng) * 0.02f;
    struct Case {
      Mode a, b;
    };
    for (Case cs : {Case{kScalar, kScalar}, Case{kVec128, kBlk128}, Case{kVec128, kVec128},
                    Case{kVec128, kScalar}, Case{kScalar, kBlk128}}) {
      const Quant qa = quantize(A, M, K, cs.a == kScalar ? 0 : 1, cs.a == kScalar ? 0 : 128);
      const Quant qb = quantize(B, N, K,
                                cs.b == kScalar   ? 0
                                : cs.b == kBlk128 ? 128
                                                  : 1,
                                cs.b == kScalar ? 0 : 128);
      std::vector<double> ref(M * N, 0.0);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k) s += double(qa.deq[i * K + k]) * qb.deq[j * K + k];
          ref[i * N + j] = s;
        }
      __nv_fp8_e4m3* dA = upload(qa.q);
      __nv_fp8_e4m3* dB = upload(qb.q);
      // layout bit 0: x's scales transposed, bit 1: w's.
      for (int layout = 0; layout < 4; ++layout) {
        if ((layout & 1) && cs.a == kScalar) continue;
        if ((layout & 2) && cs.b == kScalar) continue;
        for (int fast = 0; fast < 2; ++fast) {
          for (cudaDataType_t out_t : {CUDA_R_16BF, CUDA_R_32F}) {
            float* dsa = upload(scale_layout(qa, layout & 1));
            float* dsb = upload(scale_layout(qb, layout & 2));
            void* dC = nullptr;
            CK(cudaMalloc(&dC, M * N * 4));
            // Column-major view: D' [N, M] = B' ([K, N])^T @ A' [K, M]: cuBLASLt's A is our B.
            cublasLtMatmulDesc_t desc;
            cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
            cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n);
            auto lt_mode = [](Mode m) {
              return m == kScalar   ? CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F
                     : m == kVec128 ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F
                                    : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
            };
            const cublasLtMatmulMatrixScale_t ma = lt_mode(cs.b), mb = lt_mode(cs.a);
            cublasStatus_t st1 = cublasLtMatmulDescSetAttribute(
                desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ma, sizeof ma);
            cublasStatus_t st2 = cublasLtMatmulDescSetAttribute(
                desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mb, sizeof mb);
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &dsb,
                                           sizeof dsb);
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &dsa,
                                           sizeof dsa);
            int8_t fa = int8_t(fast);
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fa, sizeof fa);
            cublasLtMatrixLayout_t la, lb, lc;
            cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, N, K);
            cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, M, K);
            cublasLtMatrixLayoutCreate(&lc, out_t, N, M, N);
            cublasLtMatmulPreference_t pref;
            cublasLtMatmulPreferenceCreate(&pref);
            size_t ws = 32 << 20;
            void* dws = nullptr;
            CK(cudaMalloc(&dws, ws));
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &ws, sizeof ws);
            cublasLtMatmulHeuristicResult_t h[4];
            int found = 0;
            cublasStatus_t hs =
                cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 4, h, &found);
            std::string what = "refused";
            double rel = NAN, ms = NAN;
            if (hs == CUBLAS_STATUS_SUCCESS && found > 0) {
              const float alpha = 1, beta = 0;
              cudaEvent_t e0, e1;
              cudaEventCreate(&e0);
              cudaEventCreate(&e1);
              cublasStatus_t rs = CUBLAS_STATUS_SUCCESS;
              for (int it = 0; it < 11; ++it) {
                if (it == 1) cudaEventRecord(e0);
                rs = cublasLtMatmul(lt, desc, &alpha, dB, la, dA, lb, &beta, dC, lc, dC, lc,
                                    &h[0].algo, dws, ws, 0);
              }
              cudaEventRecord(e1);
              CK(cudaEventSynchronize(e1));
              float t_ms = 0;
              cudaEventElapsedTime(&t_ms, e0, e1);
              ms = t_ms / 10;
              what =
                  rs == CUBLAS_STATUS_SUCCESS ? "ran" : "matmul failed " + std::to_string(int(rs));
              std::vector<float> got(M * N);
              if (out_t == CUDA_R_32F) {
                CK(cudaMemcpy(got.data(), dC, M * N * 4, cudaMemcpyDeviceToHost));
              } else {
                std::vector<__nv_bfloat16> g(M * N);
                CK(cudaMemcpy(g.data(), dC, M * N * 2, cudaMemcpyDeviceToHost));
                for (int64_t i = 0; i < M * N; ++i) got[i] = __bfloat162float(g[i]);
              }
              double num = 0, den = 0;
              for (int64_t i = 0; i < M * N; ++i) {
                num += (got[i] - ref[i]) * (got[i] - ref[i]);
                den += ref[i] * ref[i];
              }
              rel = std::sqrt(num / den);
            } else {
              what = "refused (heuristic status " + std::to_string(int(hs)) + ", " +
                     std::to_string(found) + " algos; set mode " + std::to_string(int(st1)) + "/" +
                     std::to_string(int(st2)) + ")";
            }
            std::printf(
                "M %5ld N %5ld K %5ld  x %-10s %-10s w %-14s %-10s fast_accum %d out %-4s : %s "
                "rel_l2 %.3e  %.4f ms  %.1f TFLOP/s\n",
                long(M), long(N), long(K), mode_name(cs.a),
                cs.a == kScalar ? ""
                : (layout & 1)  ? "rows-inner"
                                : "k-inner",
                mode_name(cs.b),
                cs.b == kScalar ? ""
                : (layout & 2)  ? "rows-inner"
                                : "k-inner",
                fast, out_t == CUDA_R_32F ? "fp32" : "bf16", what.c_str(), rel, ms,
                2.0 * M * N * K / (ms * 1e9));
            cublasLtMatmulPreferenceDestroy(pref);
            cublasLtMatrixLayoutDestroy(la);
            cublasLtMatrixLayoutDestroy(lb);
            cublasLtMatrixLayoutDestroy(lc);
            cublasLtMatmulDescDestroy(desc);
            cudaFree(dws);
            cudaFree(dC);
            cudaFree(dsa);
            cudaFree(dsb);
          }
        }
      }
      cudaFree(dA);
      cudaFree(dB);
      CK(cudaGetLastError());
    }
  }
  return 0;
}
