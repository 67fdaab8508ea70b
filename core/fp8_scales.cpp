#include "core/fp8_scales.h"

#include <cmath>

#include "core/fp8.h"

namespace moe {

const char* name_of(Fp8Computed kind) {
  switch (kind) {
    case Fp8Computed::kA:
      return "a";
    case Fp8Computed::kDy:
      return "dy";
    case Fp8Computed::kDh:
      return "dh";
  }
  return "?";
}

bool fp8_scale_near_tie(float own, float got) {
  return own > 0 && got > 0 && std::fabs(double(got) / double(own) - 1.0) <= kFp8ScaleNearTie;
}

void fp8_group_tensor_scales(const float* X, const int64_t* offsets, int64_t G, int64_t cols,
                             float* scales) {
  for (int64_t g = 0; g < G; ++g) {
    const float amax = fp8_tensor_amax(X + offsets[g] * cols, (offsets[g + 1] - offsets[g]) * cols);
    scales[g] = amax > 0 ? fp8_scale(amax) : 0.0f;
  }
}

float Fp8GotScales::at(int64_t operand, Fp8Computed kind, int64_t expert) const {
  if (empty() || operand < 0 || operand >= operands || expert < 0 || expert >= experts) return 0;
  return scales[size_t((operand * kNumFp8Computed + int64_t(kind)) * experts + expert)];
}

}  // namespace moe
