#pragma once
// CUDA twins of kernels/cpu/layout.h, permute.h, combine.h and the SwiGLU of expert_ffn.h: same
// names, same argument order, same results (integers exact, floats to the last bf16 ulp).
// Storage tensors are bf16 or fp32 per `dtype`; all launches go on `stream`.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/init.h"
#include "core/workload.h"

namespace moe::cuda {

// expert_counts [E] i32, send_pos [T*K] i32 (order: expert, then t*K + k; -1 for a row dropped
// by the capacity), deterministic, with the CPU twin's drop rule. scratch: device memory of at
// least dispatch_layout_scratch_bytes, used only when dropping by probability (else nullptr is
// fine); p may be nullptr then too.
size_t dispatch_layout_scratch_bytes(int64_t T, int64_t K, int64_t E);
void dispatch_layout(const int32_t* idx, const float* p, int64_t T, int64_t K, int64_t E,
                     int64_t capacity, bool drop_by_position, int32_t* expert_counts,
                     int32_t* send_pos, void* scratch, cudaStream_t stream);
// Here and in the combines below a row with send_pos -1 (dropped) is not moved and adds
// nothing; its dp is 0.
void permute_rows(const void* src, const int32_t* send_pos, int64_t T, int64_t K, int64_t H,
                  DType dtype, void* dst, cudaStream_t stream);
// counts [ep, E_local] i32 on the device; rows = sum(counts) (known on the host), the rows of the
// source-rank-major side; the expert-major side has expert_major_offsets' rows (core/layout.h), padding
// included (zero-filled when to_expert_major, skipped otherwise). block_offsets is device
// scratch of 2 * ep * E_local int64.
void regroup_rows(const void* src, const int32_t* counts, int64_t ep, int64_t E_local, int64_t H,
                  int64_t align, int64_t rows, bool to_expert_major, DType dtype,
                  int64_t* block_offsets, void* dst, cudaStream_t stream);
void unpermute_combine(const void* y_send, const int32_t* send_pos, const float* p, int64_t T,
                       int64_t K, int64_t H, DType dtype, void* out, cudaStream_t stream);
void unpermute_combine_bwd(const void* dout, const void* y_send, const int32_t* send_pos,
                           const float* p, int64_t T, int64_t K, int64_t H, DType dtype,
                           void* dy_send, float* dp, cudaStream_t stream);
void unpermute_sum(const void* dx_send, const int32_t* send_pos, int64_t T, int64_t K, int64_t H,
                   DType dtype, float* dx_acc, cudaStream_t stream);
// Elementwise conversions between storage tensors and fp32 (the router's fp32 GEMM operands and
// the final dx).
void storage_to_f32(const void* src, int64_t n, DType dtype, float* dst, cudaStream_t stream);
void f32_to_storage(const float* src, int64_t n, DType dtype, void* dst, cudaStream_t stream);
// dst [n] = rule.value(begin + i) in the storage type (the value is already rounded to it).
void fill_seeded(const InitRule& rule, int64_t begin, int64_t n, DType dtype, void* dst,
                 cudaStream_t stream);
void swiglu_fwd(const void* h, int64_t n, int64_t F, DType dtype, void* a, cudaStream_t stream);
void swiglu_bwd(const void* da, const void* h, int64_t n, int64_t F, DType dtype, void* dh,
                cudaStream_t stream);

}  // namespace moe::cuda
