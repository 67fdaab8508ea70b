#pragma once
// The router's backward GEMMs, dx_acc += dlogits @ w_gate^T and dw_gate = x^T @ dlogits, in the
// fp32 math MATH.md asks of the router, on the tensor cores where the storage is bf16.
//
// dlogits is fp32 and its partners are bf16, so a bf16 GEMM cannot take dlogits as it is and an
// fp32 GEMM runs without tensor cores (the two took 0.7-0.9 ms of a DeepSeek-V3 step on an H100,
// beside 30 GFLOP). Instead dlogits is split into three bf16 terms, hi = bf16(v),
// mid = bf16(v - hi), lo = bf16(v - hi - mid), whose sum is v exactly (each term holds the next 8
// or more of v's 24 significant bits; the differences are exact in fp32); the products of bf16
// terms with bf16 storage are exact in fp32, so the tensor cores' bf16 GEMM with fp32 sums over
// the three terms computes the fp32 GEMM's products, summed in fp32 in another order. The three
// terms sit side by side, [T, 3E], so that each GEMM is one call with K or N three times E:
// - dx_acc [T, H] += [hi | mid | lo] [T, 3E] @ [w_gate | w_gate | w_gate]^T ([H, 3E] stored);
// - the three [H, E] column blocks of x^T @ [hi | mid | lo] are summed into dw_gate.
// fp32 storage multiplies the stored fp32 values directly (no TF32).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/router_scratch.h"
#include "core/workload.h"

namespace moe::cuda {

class GemmRunner;

// Device scratch router_grads needs for these sizes (0 for fp32 storage; core/router_scratch.h).
using moe::router_grads_scratch_bytes;

// dlogits [T, E] fp32, x [T, H] and w_gate [H, E] storage (dtype), dx_acc [T, H] fp32 (added to),
// dw_gate [H, E] fp32 (written); scratch of router_grads_scratch_bytes. On `stream`.
void router_grads(GemmRunner& gemm, const float* dlogits, const void* x, const void* w_gate,
                  int64_t T, int64_t H, int64_t E, DType dtype, float* dx_acc, float* dw_gate,
                  void* scratch, cudaStream_t stream);

// dst [rows, 3 * cols] bf16 = [hi | mid | lo] of src [rows, cols] fp32 (above). Exposed for tests.
void split_bf16x3(const float* src, int64_t rows, int64_t cols, void* dst, cudaStream_t stream);

}  // namespace moe::cuda
