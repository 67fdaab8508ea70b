#pragma once
// Combine: the returning expert outputs, in send order, summed back into token order with the
// router weights; and its backward.
#include <cstdint>

#include "core/workload.h"

namespace moe::cpu {

// out [T, H] = sum_k p[t, k] * y_send[send_pos[t*K + k]], fp32 sum, stored as out_dtype. Rows
// with send_pos -1 (dropped by the capacity) are left out here and in both functions below; their
// dp is 0.
void unpermute_combine(const float* y_send, const int32_t* send_pos, const float* p, int64_t T,
                       int64_t K, int64_t H, DType out_dtype, float* out);

// Backward of unpermute_combine for dout [T, H]: dy_send [T*K, H] at send_pos = p[t, k] * dout[t]
// (stored as dtype), dp [T, K] fp32 = <y_send[send_pos[t*K + k]], dout[t]>.
void unpermute_combine_bwd(const float* dout, const float* y_send, const int32_t* send_pos,
                           const float* p, int64_t T, int64_t K, int64_t H, DType dtype,
                           float* dy_send, float* dp);

// dx_acc [T, H] fp32 = sum_k dx_send[send_pos[t*K + k]] (overwrites): the backward of permute_rows.
void unpermute_sum(const float* dx_send, const int32_t* send_pos, int64_t T, int64_t K, int64_t H,
                   float* dx_acc);

// out [T, H] = sum_k dx_send[send_pos[t*K + k]] in fp32, stored as out_dtype (rounded once).
void unpermute_sum_storage(const float* dx_send, const int32_t* send_pos, int64_t T, int64_t K,
                           int64_t H, DType out_dtype, float* out);

}  // namespace moe::cpu
