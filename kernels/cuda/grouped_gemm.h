#pragma once
// The expert GEMMs of all local experts in one launch, on Hopper (sm_90a): the CUDA twin of
// moe::cpu::grouped_gemm (kernels/cpu/gemm.h), same layouts (core/grouped_gemm.h).
//
// A persistent kernel walks a tile schedule over every group; group sizes come from the device
// offsets, so no host copy of the counts is needed to launch it. One producer warp streams tiles
// of A and B into a ring of shared-memory stages with TMA; two MMA warpgroups run wgmma on them,
// keeping one stage's MMAs in flight, and write C through a swizzled shared-memory box (by TMA
// where C is dense per expert, the weight gradients). bf16 inputs, fp32 accumulation, bf16 or fp32
// output; or (run_fp8) e4m3 inputs with fp8_tensor's or fp8_block's scales (GroupedFp8Scales).
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/grouped_gemm.h"
#include "core/workload.h"

namespace moe::cuda {

// What one grouped GEMM needs beside its operands. offsets: [G + 1] int64, device memory;
// total_rows: an upper bound of offsets[G] (the row operands' allocated rows: TMA reads no
// further). M, N, K as in core/grouped_gemm.h (the group-dependent one is ignored).
struct GroupedGemmShape {
  GroupedLayout layout = GroupedLayout::kRowsTimesWeight;
  int64_t G = 0, total_rows = 0, M = 0, N = 0, K = 0;
};

// What a grouped GEMM's epilogue does with the product, beside storing it (kStore):
// - kSwiGLU, the up projection: h = the product, and a [rows, F] = silu(h[:, :F]) * h[:, F:]
//   from h's bf16 values, as the separate SwiGLU kernel computes it;
// - kSwiGLUBackward, the data gradient of the down projection: da = the product, rounded to bf16
//   and never stored, with h [rows, 2F] gives dh = [da * u * silu'(g), da * silu(g)], as the
//   separate SwiGLU backward kernel computes it from a stored da.
// - kAdd, the weight gradients with an fp32 output: C += the product (TMA's reduce-add), for
//   gradients summed over several calls (gradient accumulation; no step issues it since the
//   pipeline gathers its chunks' rows into one call).
enum class GroupedEpilogue { kStore, kSwiGLU, kSwiGLUBackward, kAdd };
// Whether the epilogue is SwiGLU's (forward or backward): gemm.sm90_fuse_swiglu's, bf16 out.
inline bool fuses_swiglu(GroupedEpilogue e) {
  return e == GroupedEpilogue::kSwiGLU || e == GroupedEpilogue::kSwiGLUBackward;
}

// How the kernel's two MMA warpgroups share the work (gemm.sm90_cluster, gemm.sm90_schedule):
// - cooperative: both on one 128-row tile, 64 rows each, 256 or 128 columns; in clusters of
//   `cluster` CTAs (2: neighbouring row tiles share B's loads by TMA multicast, halving B's
//   traffic from L2);
// - pingpong: each warpgroup a whole 128 x 128 tile, taking turns at the tensor cores, so that
//   one's epilogue runs beside the other's MMAs; single CTAs. The fused SwiGLU forward stays
//   cooperative (its tile pairs 128 gate columns with their up partners).
// max_ctas (gemm.sm90_ctas): at most this many persistent CTAs (whole clusters), 0 one per SM.
struct GroupedSchedule {
  int cluster = 1;
  bool pingpong = false;
  int max_ctas = 0;
};
inline GroupedSchedule schedule_of(const GemmConfig& g) {
  return {int(g.sm90_cluster), g.sm90_schedule == Sm90Schedule::kPingpong, int(g.sm90_ctas)};
}

// The scales of FP8 operands (device memory), in kernels/cuda/fp8_quantize.h's layouts:
// - fp8_tensor (block false), one per group and operand: group g's A codes times a[stride * g]
//   and its B codes times b[stride * g] are the values multiplied;
// - fp8_block (block true): in the row layout (kRowsTimesWeightT) a holds the rows' 1 x 128
//   scales (quantize_rows_fp8's) and b the weights' 128 x 128 ones of the orientation B is
//   (quantize_weight_fp8's), group g's from b + stride * g, tile (nb, kb) at nb * tiles_ld + kb
//   (weight_fp8_tiles_ld(K)); in the weight gradients a and b hold the transposed operands' 128 x
//   1 scales down each group's rows (quantize_cols_fp8's), and stride and tiles_ld are not read.
struct GroupedFp8Scales {
  const float* a = nullptr;
  const float* b = nullptr;
  int64_t stride = 0;
  bool block = false;
  int64_t tiles_ld = 0;
};

class GroupedGemm {
 public:
  // Most groups one launch takes (the tile schedule's prefix sums live in shared memory).
  static constexpr int64_t kMaxGroups = 1024;

  // Whether the current device is sm_90 (H100/H200), the one architecture the kernel is built for.
  static bool runs_on_current_device();

  // Binds to the current device; throws when it is not sm_90 or the driver has no TMA encoder.
  GroupedGemm();

  // Empty when the kernel runs this shape and these operands, else why not (for a log line):
  // bf16 inputs, bf16 or fp32 output, row lengths multiples of 8 elements (TMA's 16-byte
  // strides), 16-byte aligned operands, at most kMaxGroups groups.
  static std::string unsupported_reason(const GroupedGemmShape& s, const void* A, const void* B,
                                        const void* C, DType in, DType out);

  // C = the grouped product (see core/grouped_gemm.h), on `stream`. Rows of C outside every group
  // are not written.
  void run(const GroupedGemmShape& s, const int64_t* offsets, const void* A, const void* B, void* C,
           DType in, DType out, cudaStream_t stream) const;

  // A grouped GEMM with an epilogue fused (see GroupedEpilogue): kSwiGLU writes C = h and
  // aux = a; kSwiGLUBackward reads aux = h [rows, 2N] and writes C = dh [rows, 2N]; kAdd adds
  // to C. Empty reason when the fused kernel takes the shape: kSwiGLU the kRowsTimesWeight layout
  // with F = N / 2 a multiple of 128, kSwiGLUBackward the kRowsTimesWeightT layout, both bf16
  // output; kAdd the kRowsTTimesRows layout with fp32 output (and what run() needs). kStore is
  // run().
  static std::string fused_unsupported_reason(const GroupedGemmShape& s, GroupedEpilogue epi,
                                              DType out);
  void run_fused(GroupedEpilogue epi, const GroupedGemmShape& s, const int64_t* offsets,
                 const void* A, const void* B, void* C, void* aux, DType in, DType out,
                 cudaStream_t stream) const;

  // FP8 (e4m3 codes) with fp8_tensor's or fp8_block's scales (GroupedFp8Scales), the sums fp32
  // (each 128 K of the tensor cores' partial sums added into an fp32 total: times its block's
  // scales with fp8_block, the whole total times the groups' scales once with fp8_tensor),
  // rounded once. FP8 wgmma reads both operands K-major, so two layouts:
  // - kRowsTimesWeightT, C [rows, N] (bf16) = A [rows, K] @ B[g]^T with B [G, N, K] (the forward
  //   passes the weights' transposed codes): kStore or kSwiGLUBackward (on the scaled product,
  //   rounded to bf16, as a stored da); K a multiple of 16.
  // - kRowsTTimesRows with both operands transposed: C[g] [M, N] = A^T[:, rows of g] @
  //   B^T[:, rows of g]^T, A^T [M, ld] and B^T [N, ld] the row operands' codes down their
  //   columns, ld = s.total_rows (a multiple of 16), every group starting at a multiple of 16
  //   rows (align 16: TMA reads 16-byte aligned boxes along K); bf16 or fp32 C, kStore or
  //   (fp32) kAdd; empty groups get zeros.
  // Tiles of 128 rows by tile_n_for's columns, cooperative (a ping-pong schedule runs
  // cooperative here), in clusters as the schedule says. The empty reason when the kernel takes the
  // case: N a multiple of 8, 16-byte aligned operands, at most kMaxGroups groups, and the above;
  // with block scales, the weight gradients' M a multiple of 4 and their scales 16-byte aligned
  // too.
  static std::string fp8_unsupported_reason(const GroupedGemmShape& s, const void* A, const void* B,
                                            const void* C, GroupedEpilogue epi, DType out,
                                            const GroupedFp8Scales* scales = nullptr);
  void run_fp8(GroupedEpilogue epi, const GroupedGemmShape& s, const int64_t* offsets,
               const void* A, const void* B, const GroupedFp8Scales& scales, void* C, void* aux,
               DType out, cudaStream_t stream) const;

  // The tile width along N the kernel uses for a shape, bf16 and FP8 (for tests that cover
  // both).
  static int tile_n_for(const GroupedGemmShape& s);
  // Forces the tile width, bf16 and FP8 (0: by shape). For tests.
  void force_tile_n(int n) { forced_tile_n_ = n; }
  // Throws for a cluster other than 1 or 2, or ping-pong in clusters.
  static void check_schedule(const GroupedSchedule& sched);
  void set_schedule(const GroupedSchedule& sched);
  const GroupedSchedule& schedule() const { return sched_; }

 private:
  // The tile width this runner uses for a shape, forced or by shape (ping-pong takes 128 anyway).
  int tile_n(const GroupedGemmShape& s) const;

  int num_sms_ = 0;
  int forced_tile_n_ = 0;
  GroupedSchedule sched_;
  void* encode_ = nullptr;  // the driver's cuTensorMapEncodeTiled
};

}  // namespace moe::cuda
