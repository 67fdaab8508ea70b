// Throwaway probe (session 37): cuBLASLt's top heuristic candidates for Mixtral-8x7B's six expert
// GEMMs (one expert, 2048 rows), bf16 and FP8 per-tensor, each timed alone, as GemmRunner
// describes them (same layouts, preferences, 32 MiB workspace).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>
#define CK(x)                                         \
  do {                                                \
    auto e_ = (x);                                    \
    if (e_ != cudaSuccess) {                          \
      printf("cuda %d line %d\n", int(e_), __LINE__); \
      exit(1);                                        \
    }                                                 \
  } while (0)
#define LK(x)                                           \
  do {                                                  \
    auto e_ = (x);                                      \
    if (e_ != CUBLAS_STATUS_SUCCESS) {                  \
      printf("cublas %d line %d\n", int(e_), __LINE__); \
      exit(1);                                          \
    }                                                   \
  } while (0)
__global__ void fill(unsigned char* p, size_t n, int fp8) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ unsigned(i >> 32) * 40503u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    // fp8: any code but NaN (0x7f, 0xff) with exponent <= 8; bf16 (high byte odd index): |v| < 1
    p[i] = fp8 ? (unsigned char)((h & 0x87) | ((h >> 8) & 0x3) << 3 | 0x20)
               : (i & 1 ? (unsigned char)((h & 0x80) | 0x3c | (h >> 9 & 0x3)) : (unsigned char)h);
  }
}
struct G {
  const char* name;
  long M, N, K;
  bool ta, tb;
};
int main(int argc, char** argv) {
  const long rows = argc > 1 ? atol(argv[1]) : 2048;
  const long H = argc > 2 ? atol(argv[2]) : 4096, F = argc > 3 ? atol(argv[3]) : 14336;
  const int want = 16;
  std::vector<G> gs = {
      {"up", rows, 2 * F, H, false, false},   {"down", rows, H, F, false, false},
      {"dgrad_a", rows, F, H, false, true},   {"dgrad_x", rows, H, 2 * F, false, true},
      {"wgrad_out", F, H, rows, true, false}, {"wgrad_in", H, 2 * F, rows, true, false}};
  cublasLtHandle_t lt;
  LK(cublasLtCreate(&lt));
  size_t ws_bytes = size_t(32) << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  size_t big = size_t(2 * F) * std::max(H, rows) * 2 + 4096;
  void *A, *B, *C;
  CK(cudaMalloc(&A, big));
  CK(cudaMalloc(&B, big));
  CK(cudaMalloc(&C, big));

  float* one;
  CK(cudaMalloc(&one, 16));
  float h1[4] = {1, 1, 1, 1};
  CK(cudaMemcpy(one, h1, 16, cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  for (int fp8 = 0; fp8 < 2; ++fp8)
    for (auto& g : gs) {
      fill<<<1024, 256>>>((unsigned char*)A, big, fp8);
      fill<<<1024, 256>>>((unsigned char*)B, big, fp8);
      CK(cudaDeviceSynchronize());
      cublasLtMatmulDesc_t d;
      cublasLtMatrixLayout_t la, lb, lc;
      LK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const uint64_t m = g.N, n = g.M, k = g.K;
      cublasOperation_t opa, opb;
      if (fp8) {
        opa = CUBLAS_OP_T;
        opb = CUBLAS_OP_N;
        LK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k));
        LK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n, k));
        int32_t sm = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
        LK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &sm, 4));
        LK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &sm, 4));
        LK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &one,
                                          sizeof(one)));
        LK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &one,
                                          sizeof(one)));
      } else {
        opa = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        opb = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
        const uint64_t ar = opa == CUBLAS_OP_N ? m : k, ac = opa == CUBLAS_OP_N ? k : m;
        const uint64_t br = opb == CUBLAS_OP_N ? k : n, bc = opb == CUBLAS_OP_N ? n : k;
        LK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, ar, ac, ar));
        LK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, br, bc, br));
      }
      LK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, m, n, m));
      LK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &opa, 4));
      LK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &opb, 4));
      cublasLtMatmulPreference_t p;
      LK(cublasLtMatmulPreferenceCreate(&p));
      LK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &ws_bytes, 8));
      uint32_t mask = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      LK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                              4));
      cublasLtMatmulHeuristicResult_t res[want];
      int got = 0;
      LK(cublasLtMatmulAlgoGetHeuristic(lt, d, la, lb, lc, lc, p, want, res, &got));
      const double flop = 2.0 * g.M * g.N * g.K;
      float alpha = 1, beta = 0;
      double first = 0, best = 1e30;
      int bi = -1;
      for (int i = 0; i < got; ++i) {
        auto run = [&] {
          return cublasLtMatmul(lt, d, &alpha, A, la, B, lb, &beta, C, lc, C, lc, &res[i].algo, ws,
                                ws_bytes, st);
        };
        if (run() != CUBLAS_STATUS_SUCCESS) {
          printf("  %s %s algo %d failed\n", fp8 ? "fp8" : "bf16", g.name, i);
          continue;
        }
        for (int w = 0; w < 3; ++w) run();
        const int reps = 20;
        CK(cudaEventRecord(e0, st));
        for (int r = 0; r < reps; ++r) run();
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        ms /= reps;
        int32_t id = -1;
        uint32_t tile = 0, stages = 0, splitk = 0;
        size_t w8;
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_ID, &id, 4, &w8);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, 4,
                                             &w8);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                             4, &w8);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                             4, &w8);
        printf(
            "  %-4s %-9s #%2d %8.3f ms %7.1f TFLOP/s  algo %d tile %u stages %u splitk %u waves "
            "%.2f\n",
            fp8 ? "fp8" : "bf16", g.name, i, ms, flop / ms / 1e9, id, tile, stages, splitk,
            res[i].wavesCount);
        if (i == 0) first = ms;
        if (ms < best) {
          best = ms;
          bi = i;
        }
      }
      printf(
          "%-4s %-9s M %ld N %ld K %ld: %d candidates, heuristic #0 %.3f ms, best #%d %.3f ms "
          "(%.1f%% faster)\n",
          fp8 ? "fp8" : "bf16", g.name, g.M, g.N, g.K, got, first, bi, best,
          100.0 * (first / best - 1));
      fflush(stdout);
      cublasLtMatmulPreferenceDestroy(p);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(d);
    }
  return 0;
}
