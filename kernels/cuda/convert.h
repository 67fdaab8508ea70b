#pragma once
// Storage <-> fp32 conversions and seeded fills, made on the GPU (the CPU backend keeps floats, so
// these have no twin there; kernels/cpu/gemm.h's store_as is the rounding they match). All
// launches go on `stream`.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/init.h"
#include "core/workload.h"

namespace moe::cuda {

// Elementwise conversions between storage tensors and fp32 (the router's fp32 GEMM operands and
// the final dx).
void storage_to_f32(const void* src, int64_t n, DType dtype, float* dst, cudaStream_t stream);
void f32_to_storage(const float* src, int64_t n, DType dtype, void* dst, cudaStream_t stream);
// dst [n] = rule.value(begin + i) in the storage type (the value is already rounded to it).
void fill_seeded(const InitRule& rule, int64_t begin, int64_t n, DType dtype, void* dst,
                 cudaStream_t stream);
// dst [n] = a fixed pattern in [-0.5, 0.5) of the storage type, never zero, varied by salt: the
// calibration GEMM's operands, so that the tensor cores toggle as they do on real data.
void fill_calibration_pattern(void* dst, int64_t n, uint32_t salt, DType dtype,
                              cudaStream_t stream);
// dst [n] = e4m3 codes of a fixed pattern varied by salt, both signs, never NaN: the FP8
// calibration GEMM's operands.
void fill_fp8_calibration_pattern(uint8_t* dst, int64_t n, uint32_t salt, cudaStream_t stream);

}  // namespace moe::cuda
