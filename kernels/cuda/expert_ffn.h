#pragma once
// CUDA twin of kernels/cpu/expert_ffn.h: the SwiGLU expert FFN over expert-major rows, its GEMMs
// on cuBLASLt (GemmRunner: a call per expert over side streams, or one grouped call), and its
// backward in the same two halves. Same names and argument order as the twin, then the runner,
// the reusable GEMM lists and the stream; storage tensors are bf16 or fp32 per `dtype`.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/workload.h"

namespace moe::cuda {

class GemmRunner;
struct GemmProblem;
// Two GEMM lists reused from step to step, so that building them allocates in warm-up only.
using ExpertGemmLists = std::pair<std::vector<GemmProblem>, std::vector<GemmProblem>>;

// a [n, F] = silu(h[:, :F]) * h[:, F:]; dh [n, 2F] its backward (as the CPU twin).
void swiglu_fwd(const void* h, int64_t n, int64_t F, DType dtype, void* a, cudaStream_t stream);
void swiglu_bwd(const void* da, const void* h, int64_t n, int64_t F, DType dtype, void* dh,
                cudaStream_t stream);

// row_offsets [E_local + 1] host: expert l owns rows [off[l], off[l+1]). xe [R, H], w_in
// [E_local, H, 2F], w_out [E_local, F, H] -> h [R, 2F], a [R, F], ye [R, H].
void expert_ffn_fwd(const void* xe, const void* w_in, const void* w_out, const int64_t* off,
                    int64_t E_local, int64_t H, int64_t F, DType dtype, void* h, void* a, void* ye,
                    GemmRunner& gemm, ExpertGemmLists& lists, cudaStream_t stream);
// dye [R, H] -> da [R, F], dh [R, 2F] (scratch, read by the weight half) and dxe [R, H].
void expert_ffn_bwd_data(const void* dye, const void* h, const void* w_in, const void* w_out,
                         const int64_t* off, int64_t E_local, int64_t H, int64_t F, DType dtype,
                         void* da, void* dh, void* dxe, GemmRunner& gemm, ExpertGemmLists& lists,
                         cudaStream_t stream);
// dw_in [E_local, H, 2F] and dw_out [E_local, F, H] in grad_dtype, fp32 accumulation,
// overwritten (an expert with no rows gets zeros).
void expert_ffn_bwd_weights(const void* dye, const void* xe, const void* a, const void* dh,
                            const int64_t* off, int64_t E_local, int64_t H, int64_t F, DType dtype,
                            DType grad_dtype, void* dw_in, void* dw_out, GemmRunner& gemm,
                            ExpertGemmLists& lists, cudaStream_t stream);

}  // namespace moe::cuda
