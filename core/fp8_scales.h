#pragma once
// fp8_tensor's per-tensor scales of the operands a step computes itself (a, dy and dh of each
// routed expert's GEMMs; x and the weights are inputs, the same on both sides), as a backend
// reports them, and the check's use of them. An operand's scale is its largest magnitude / 448;
// where that element lies near a bf16 rounding boundary, a backend whose FP8 tensor cores sum
// with fewer bits than the reference rounds it the other way, the scale moves by a bf16 ulp or
// two, and every code of the operand with it (a 1-2e-2 difference on the rows it feeds:
// results/2026-11-28-session34). The reference then takes the backend's scale, as it takes the
// backend's routing at a near tie: the values it rounds stay its own, so a wrong value still
// shows.
#include <cstdint>
#include <vector>

namespace moe {

// The operands whose scales are reported, in this order.
enum class Fp8Computed { kA, kDy, kDh };
constexpr int kNumFp8Computed = 3;
const char* name_of(Fp8Computed kind);

// Two scales are a near tie where they differ by at most this much relative to the reference's:
// two bf16 ulps at the bottom of a binade (the largest split seen was two ulps, 1.06%).
constexpr float kFp8ScaleNearTie = 1.0f / 64;
bool fp8_scale_near_tie(float own, float got);

// Each group's per-tensor scale of X's rows [offsets[g], offsets[g + 1]) of `cols` values: the
// scale core/fp8.h's per-tensor quantization gives that operand; 0 for a group without a
// nonzero value (none to adopt: its scale, 1, is a convention, not an amax).
void fp8_group_tensor_scales(const float* X, const int64_t* offsets, int64_t G, int64_t cols,
                             float* scales);

// The backend's scales of the world's routed-expert operands: operand id (core/reference.h's
// gemm_operand) x kind x global expert, 0 where none was reported.
struct Fp8GotScales {
  int64_t operands = 0, experts = 0;
  std::vector<float> scales;  // [operands][kNumFp8Computed][experts]
  bool empty() const { return scales.empty(); }
  float at(int64_t operand, Fp8Computed kind, int64_t expert) const;
};

// Which of those the reference took (1), and by how much they differed (|got / own - 1|).
struct Fp8ScaleAdoptions {
  std::vector<uint8_t> adopted;  // the shape of Fp8GotScales::scales
  std::vector<float> rel_diff;
};

}  // namespace moe
