#pragma once
// CUDA twin of kernels/cpu/expert_ffn.h: the SwiGLU expert FFN over expert-major rows, and its
// backward in the same two halves. Each of its six GEMMs covers every expert at once, through the
// method the GemmRunner has for that GEMM (ExpertGemm; the scope around it also times it where
// the runner's clock is on): the grouped sm90 kernel (one launch, reading the device offsets), or
// a cuBLASLt call per expert over side streams, or one cuBLAS grouped call. Same names and argument
// order as the twin, then the runner, the reusable GEMM lists and the stream; storage tensors are
// bf16 or fp32 per `dtype`.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/grouped_gemm.h"
#include "core/ops.h"
#include "core/workload.h"

namespace moe::cuda {

class GemmRunner;
struct GemmProblem;
// Two GEMM lists reused from step to step, so that building them allocates in warm-up only.
using ExpertGemmLists = std::pair<std::vector<GemmProblem>, std::vector<GemmProblem>>;

// One GEMM of every expert (core/grouped_gemm.h gives the layout and M, N, K), by the runner's
// method; `list` is scratch for the per-expert problems. accumulate (fp32 out) adds to C. The
// grouped sm90 kernel reads the device offsets; the per-expert list needs the host's, and throws
// a clear error where a sync-free step has none.
void experts_gemm(GroupedLayout layout, const ExpertOffsets& rows, int64_t E_local, int64_t M,
                  int64_t N, int64_t K, const void* A, const void* B, void* C, DType in, DType out,
                  GemmRunner& gemm, std::vector<GemmProblem>& list, cudaStream_t stream,
                  bool accumulate = false);

// Where a SwiGLU kernel also finds each expert's largest |output| as stored (fp8_tensor's amax,
// so that the quantization after it reads its input once): expert g owns rows [offsets[g],
// offsets[g + 1]) (device, G + 1), and its amax's float bits are max-ed into bits[stride * g],
// which the caller zeroes. Unset (bits null): no amax.
struct GroupAmax {
  const int64_t* offsets = nullptr;
  int64_t G = 0;
  unsigned* bits = nullptr;
  int64_t stride = 0;
};

// a [n, F] = silu(h[:, :F]) * h[:, F:]; dh [n, 2F] its backward (as the CPU twin). n is read
// from the device (*n_dev, the experts' last offset), at most n_bound, which sizes the grid.
void swiglu_fwd(const void* h, const int64_t* n_dev, int64_t n_bound, int64_t F, DType dtype,
                void* a, cudaStream_t stream, const GroupAmax& amax = {});
void swiglu_bwd(const void* da, const void* h, const int64_t* n_dev, int64_t n_bound, int64_t F,
                DType dtype, void* dh, cudaStream_t stream, const GroupAmax& amax = {});

// xe [R, H], w_in [E_local, H, 2F], w_out [E_local, F, H] -> h [R, 2F], a [R, F], ye [R, H].
void expert_ffn_fwd(const void* xe, const void* w_in, const void* w_out, const ExpertOffsets& rows,
                    int64_t E_local, int64_t H, int64_t F, DType dtype, void* h, void* a, void* ye,
                    GemmRunner& gemm, ExpertGemmLists& lists, cudaStream_t stream);
// dye [R, H] -> da [R, F] (scratch: left unwritten where the grouped sm90 kernel fuses SwiGLU's
// backward into da's GEMM, gemm.sm90_fuse_swiglu), dh [R, 2F] (read by the weight half) and dxe [R,
// H].
void expert_ffn_bwd_data(const void* dye, const void* h, const void* w_in, const void* w_out,
                         const ExpertOffsets& rows, int64_t E_local, int64_t H, int64_t F,
                         DType dtype, void* da, void* dh, void* dxe, GemmRunner& gemm,
                         ExpertGemmLists& lists, cudaStream_t stream);
// dw_in [E_local, H, 2F] and dw_out [E_local, F, H] in grad_dtype, fp32 accumulation,
// overwritten (an expert with no rows gets zeros), or with accumulate (grad_dtype fp32) added to
// what they hold (an expert with no rows leaves them as they are).
void expert_ffn_bwd_weights(const void* dye, const void* xe, const void* a, const void* dh,
                            const ExpertOffsets& rows, int64_t E_local, int64_t H, int64_t F,
                            DType dtype, DType grad_dtype, void* dw_in, void* dw_out,
                            bool accumulate, GemmRunner& gemm, ExpertGemmLists& lists,
                            cudaStream_t stream);

}  // namespace moe::cuda
