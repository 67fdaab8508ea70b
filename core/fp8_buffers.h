#pragma once
// The sizes of the CUDA backend's FP8 buffers: the weights' cached codes (both ways round, with
// their scales), the expert GEMMs' operand scratch and a's transposed codes kept from the forward
// to the weight gradients. kernels/cuda allocates by these, and the memory estimate (--dry-run,
// the run's refusal before allocating) counts them, on any build.
#include <cstddef>
#include <cstdint>

#include "core/workload.h"

namespace moe {

// Per-tensor scales sit 4 floats apart: cuBLASLt reads a scale from a 16-byte aligned address.
constexpr int64_t kTensorScaleStride = 4;

// Scales a transposed fp8_block operand [K, ld] of G groups and rows_bound rows needs at most:
// K * (rows_bound / 128 + G).
int64_t cols_fp8_scale_bound(int64_t G, int64_t rows_bound, int64_t K);
// An fp8_block weight orientation [N, K]'s row of 128 x 128 tile scales: ceil(K / 128) rounded up
// to a multiple of 4 (cuBLASLt's BLK128x128_32F layout on Hopper), and one expert's share of a
// weight [P, Q]'s scales, either way round (a multiple of 4: every expert's start 16-byte aligned).
int64_t weight_fp8_tiles_ld(int64_t K);
int64_t weight_fp8_scale_stride(int64_t P, int64_t Q);
// Floats of one orientation of G experts' quantized weight [P, Q]'s scales, either recipe's.
int64_t weight_fp8_scales(int64_t G, int64_t P, int64_t Q);
// The row stride of a weight gradient's transposed operands: FP8 rows start 16-byte aligned.
int64_t fp8_transposed_ld(int64_t rows_bound);

// Where G experts' w_in [H, 2F] and w_out [F, H], quantized once, sit in their buffer: each
// weight's codes as stored, then transposed, then the two orientations' scales (room for either
// recipe), each piece 256-byte aligned; byte offsets from the buffer's start, and its size. The
// CUDA backend quantizes into this layout and the memory estimate counts its size.
struct Fp8WeightPieces {
  size_t stored, transposed, stored_scales, transposed_scales;
};
struct Fp8WeightsLayout {
  Fp8WeightPieces in, out;
  size_t bytes;
};
Fp8WeightsLayout fp8_weights_layout(int64_t G, int64_t H, int64_t F);
inline size_t fp8_weights_bytes(int64_t G, int64_t H, int64_t F) {
  return fp8_weights_layout(G, H, F).bytes;
}

// An operand's transposed codes kept from a forward to its weight gradient, in one allocation:
// the codes padded to 256 bytes (where the scales start), then the scales.
struct Fp8KeptBytes {
  size_t codes = 0, scales = 0;
  size_t codes_padded() const { return (codes + 255) / 256 * 256; }
  size_t total() const { return codes_padded() + scales; }
};
// The FP8 GEMMs' scratch for rows_bound expert-major rows of E_local experts: the row codes of the
// GEMM at hand (a, its widest operand) and its scales, the data gradients' transposed codes for
// the weight gradients (dy_t, dh_t) and theirs; and the weight gradients' first operands, xe's
// and a's transposed codes and scales, which are kept from each forward to its weight gradients.
struct Fp8ScratchBytes {
  size_t a = 0, dy_t = 0, dh_t = 0, a_scales = 0, dy_t_scales = 0, dh_t_scales = 0;
  Fp8KeptBytes xe_t, a_t;
};
Fp8ScratchBytes fp8_scratch_bytes(int64_t rows_bound, int64_t E_local, int64_t H, int64_t F);

// What the CUDA backend adds to the step's memory for w.precision's FP8 (0 for bf16): the routed
// and shared experts' cached weight codes, the scratch (shared by both, sized for the larger),
// and the transposed codes each forward keeps for its weight gradients: the routed experts' a
// and xe (not xe with dispatch_dtype fp8, whose rows come as codes; neither with chunks, whose
// weight gradients take rows gathered since), each shared expert's a and their one x. rows: the
// expert-major rows each chunk is planned for (BufferPlan::planned_rows); w resolved.
int64_t cuda_fp8_step_bytes(const Workload& w, int64_t rows);

}  // namespace moe
