#pragma once
// bf16 on the host: the exact rounding the GPU applies when it stores bf16 (round to nearest even),
// so that the CPU backend sees the same values the CUDA backend stores.
#include <cstdint>
#include <cstring>

#include "core/hd.h"

namespace moe {

MOE_HD inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
    return uint16_t((u >> 16) | 0x40u);  // NaN
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return uint16_t(u >> 16);
}

MOE_HD inline float bf16_bits_to_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

MOE_HD inline float round_to_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }

}  // namespace moe
