#include "kernels/cpu/cpu_ops.h"

#include <vector>

#include "core/error.h"
#include "core/fp8.h"
#include "core/fp8_scales.h"
#include "core/layout.h"
#include "kernels/cpu/combine.h"
#include "kernels/cpu/expert_ffn.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layout.h"
#include "kernels/cpu/permute.h"
#include "kernels/cpu/router.h"
#include "kernels/cpu/shared_sum.h"

namespace moe {
namespace {

inline const float* F(const void* p) { return static_cast<const float*>(p); }
inline float* F(void* p) { return static_cast<float*>(p); }

// The values of the dispatched packed rows at `offsets` (dispatch_dtype fp8), and with `stored`
// rounded to the storage dtype, as w_in's gradient takes them.
std::vector<float> dispatched_values(const Dims& d, const void* packed,
                                     const ExpertOffsets& offsets, bool stored) {
  const int64_t n = offsets.device[d.E_local];
  std::vector<float> v(size_t(n * d.H));
  fp8_unpack_rows(static_cast<const uint8_t*>(packed), n, d.H, v.data());
  if (stored)
    for (float& x : v) x = cpu::store_as(d.dtype, x);
  return v;
}

// The calibration GEMMs' operands A [M, K], B [K, N] and C [M, N]: host vectors, not alloc() (a
// start-up measurement is not the step's backend memory), nonzero values in the storage dtype, so
// that the timed loop sees the data a step would.
struct CalibrationOperands {
  std::vector<float> a, b, c;
  CalibrationOperands(int64_t M, int64_t N, int64_t K, DType dtype)
      : a(size_t(M * K)), b(size_t(K * N)), c(size_t(M * N)) {
    for (size_t i = 0; i < a.size(); ++i) a[i] = cpu::store_as(dtype, float(i % 251) / 251 - 0.5f);
    for (size_t i = 0; i < b.size(); ++i) b[i] = cpu::store_as(dtype, float(i % 241) / 241 - 0.5f);
  }
};

}  // namespace

double CpuOps::time_dense_gemm_ms(int64_t M, int64_t N, int64_t K, int iters) {
  MOE_CHECK(M > 0 && N > 0 && K > 0 && iters > 0,
            "dense GEMM calibration " << M << "x" << N << "x" << K << ", " << iters << " iters");
  const DType dtype = device_.storage_dtype();
  CalibrationOperands o(M, N, K, dtype);
  auto gemm = [&] {
    cpu::gemm(false, false, M, N, K, o.a.data(), o.b.data(), o.c.data(), false, dtype);
  };
  gemm();  // untimed: grows the GEMM's packing buffers
  return median_call_ms(*device_.make_timer({"calibration_gemm"}), iters, gemm);
}

double CpuOps::time_dense_fp8_gemm_ms(int64_t M, int64_t N, int64_t K, Fp8Recipe recipe,
                                      int iters) {
  MOE_CHECK(M > 0 && N > 0 && K > 0 && iters > 0,
            "FP8 GEMM calibration " << M << "x" << N << "x" << K << ", " << iters << " iters");
  // The expert phases' FP8 GEMM: one group, its operands quantized in each call, then multiplied.
  const DType dtype = device_.storage_dtype();
  CalibrationOperands o(M, N, K, dtype);
  const int64_t offsets[2] = {0, M};
  auto gemm = [&] {
    cpu::grouped_gemm_fp8(GroupedLayout::kRowsTimesWeight, 1, offsets, 0, N, K, o.a.data(),
                          o.b.data(), o.c.data(), dtype, recipe);
  };
  gemm();
  return median_call_ms(*device_.make_timer({"calibration_fp8_gemm"}), iters, gemm);
}

void CpuOps::router_fwd(const Dims& d, const RouterConfig& cfg, const void* x, const void* w_gate,
                        const float* expert_bias, const int32_t* forced_idx, float* logits,
                        float* scores, int32_t* idx, float* p, float* stats) {
  cpu::router_logits(F(x), F(w_gate), d.T, d.H, d.E, logits);
  cpu::router_topk(logits, expert_bias, forced_idx, cfg, d.T, d.E, d.K, scores, idx, p);
  cpu::router_loss_stats(logits, scores, idx, cfg, d.T, d.E, d.K, stats);
}

void CpuOps::router_bwd(const Dims& d, const RouterConfig& cfg, const void* x, const void* w_gate,
                        const float* logits, const float* scores, const int32_t* idx,
                        const float* dp, const float* global_stats, float* dlogits, float* dx_acc,
                        void* dx, float* dw_gate) {
  cpu::router_bwd(logits, scores, idx, dp, global_stats, cfg, d.N, d.T, d.E, d.K, dlogits);
  cpu::router_input_grads(F(x), F(w_gate), dlogits, d.T, d.H, d.E, dx_acc, dw_gate);
  for (int64_t i = 0; i < d.T * d.H; ++i) F(dx)[i] = cpu::store_as(d.dtype, dx_acc[i]);
}

void CpuOps::experts_to_slots(const Dims& d, const int32_t* idx, const int32_t* slot_of,
                              int32_t* slots) {
  cpu::experts_to_slots(idx, d.T * d.K, slot_of, slots);
}

void CpuOps::dispatch_layout(const Dims& d, const int32_t* idx, const float* p,
                             int32_t* expert_counts, int32_t* send_pos) {
  cpu::dispatch_layout(idx, p, d.T, d.K, d.E, d.capacity, d.drop_by_position, expert_counts,
                       send_pos);
}

void CpuOps::expert_major_positions(const Dims& d, const int32_t* send_pos, const int32_t* starts,
                                    const int32_t* dest, int32_t* pos) {
  cpu::expert_major_positions(send_pos, starts, dest, d.ep, d.T * d.K, d.E_local, pos);
}

void CpuOps::dedup_layout(const Dims& d, const int32_t* idx, const float* p,
                          const int32_t* expert_counts, const int32_t* send_pos, int32_t* wire_pos,
                          int32_t* wire_counts, int32_t* slots, float* weights) {
  cpu::dedup_layout(idx, p, expert_counts, send_pos, d.T, d.K, d.E, d.ep, wire_pos, wire_counts,
                    slots, weights);
}

// The CPU's memory is the host's: the offsets are computed where the CUDA backend computes them,
// and every step's expert FFN reads them there, as the sync-free step's GEMMs do.
void CpuOps::expert_offsets(const Dims& d, const int32_t* counts, int64_t stride,
                            int64_t* offsets) {
  expert_major_offsets_strided(counts, d.ep, stride, d.E_local, d.align, offsets);
}

void CpuOps::expert_blocks(const Dims& d, const int32_t* counts, int64_t stride, int64_t first,
                           int32_t* table, int64_t* offsets) {
  expert_block_table(counts, d.ep, stride, first, d.E_local, d.align, table, offsets);
}

void CpuOps::zero_expert_padding(const Dims& d, const int32_t* rows, const int64_t* offsets,
                                 void* expert_major) {
  cpu::zero_expert_padding(rows, offsets, d.E_local, d.H, F(expert_major));
}

void CpuOps::merge_chunk_layout(const Dims& d, const std::vector<ChunkRows>& chunks,
                                int64_t* offsets, int64_t* blocks) {
  merged_chunk_layout(chunks.data(), int64_t(chunks.size()), d.ep, d.E_local, d.align, offsets,
                      blocks);
}

void CpuOps::rows_to_ranks(const Dims& d, const void* src, size_t row_bytes,
                           const int32_t* wire_pos, int64_t first_row, const RankBases& to) {
  cpu::rows_to_ranks(src, row_bytes, wire_pos, d.T, d.ep, first_row, to.at);
}

void CpuOps::rows_to_sources(const Dims& d, const void* src, size_t row_bytes,
                             const int32_t* wire_pos_all, int64_t me, const RankBases& to) {
  cpu::rows_to_sources(src, row_bytes, wire_pos_all, d.T, d.ep, me, to.at);
}

void CpuOps::gather_chunk_rows(const Dims& d, int64_t chunks, const int64_t* offsets,
                               const int64_t* blocks, int64_t, const void* src, size_t row_bytes,
                               void* dst) {
  cpu::gather_chunk_rows(offsets, blocks, chunks, d.ep, d.E_local, src, row_bytes, dst);
}

void CpuOps::permute(const Dims& d, const void* x, const int32_t* send_pos, void* send) {
  cpu::permute_rows(F(x), send_pos, d.T, d.K, d.H, F(send));
}

void CpuOps::regroup(const Dims& d, const void* src, const int32_t* counts, int64_t,
                     bool to_expert_major, void* dst) {
  cpu::regroup_rows(F(src), counts, d.ep, d.E_local, d.H, d.align, to_expert_major, F(dst));
}

void CpuOps::pack_fp8_rows(const Dims& d, const void* x, int64_t n, void* packed) {
  fp8_pack_rows(F(x), n, d.H, static_cast<uint8_t*>(packed));
}

void CpuOps::expert_ffn_fwd(const Dims& d, const void* xe, const void* w_in, const void* w_out,
                            const ExpertOffsets& offsets, void* h, void* a, void* ye) {
  if (!d.dispatch_fp8) {
    cpu::expert_ffn_fwd(F(xe), F(w_in), F(w_out), offsets.device, d.E_local, d.H, d.F, d.dtype,
                        F(h), F(a), F(ye), d.precision);
    report_scales(d, Fp8Computed::kA, a, d.F, offsets);
    return;
  }
  // The dispatched FP8 rows' values, which the up projection takes as they are.
  const std::vector<float> xq = dispatched_values(d, xe, offsets, false);
  cpu::expert_ffn_fwd(xq.data(), F(w_in), F(w_out), offsets.device, d.E_local, d.H, d.F, d.dtype,
                      F(h), F(a), F(ye), d.precision, true);
}

// The scales the FP8 GEMMs took, from the same values (grouped_gemm_fp8 quantizes each group's
// operand through core/fp8.h; the padding rows are zeros, which change no amax).
void CpuOps::report_scales(const Dims& d, Fp8Computed kind, const void* X, int64_t cols,
                           const ExpertOffsets& offsets) {
  if (!fp8_scales_ || d.precision != Precision::kFp8Tensor) return;
  fp8_group_tensor_scales(static_cast<const float*>(X), offsets.device, d.E_local, cols,
                          fp8_scales_ + int64_t(kind) * d.E_local);
}

void CpuOps::expert_ffn_bwd_data(const Dims& d, const void* dye, const void* h, const void* w_in,
                                 const void* w_out, const ExpertOffsets& offsets, void* da,
                                 void* dh, void* dxe) {
  cpu::expert_ffn_bwd_data(F(dye), F(h), F(w_in), F(w_out), offsets.device, d.E_local, d.H, d.F,
                           d.dtype, F(da), F(dh), F(dxe), d.precision);
  report_scales(d, Fp8Computed::kDy, dye, d.H, offsets);
  report_scales(d, Fp8Computed::kDh, dh, 2 * d.F, offsets);
}

void CpuOps::expert_ffn_bwd_weights(const Dims& d, const void* dye, const void* xe, const void* a,
                                    const void* dh, const ExpertOffsets& offsets, void* dw_in,
                                    void* dw_out) {
  std::vector<float> x_bf16;
  if (d.dispatch_fp8) {
    x_bf16 = dispatched_values(d, xe, offsets, true);
    xe = x_bf16.data();
  }
  cpu::expert_ffn_bwd_weights(F(dye), F(xe), F(a), F(dh), offsets.device, d.E_local, d.H, d.F,
                              d.grad_dtype, F(dw_in), F(dw_out), false, d.precision);
}

void CpuOps::combine_fwd(const Dims& d, const void* y_send, const int32_t* send_pos, const float* p,
                         void* out) {
  cpu::unpermute_combine(F(y_send), send_pos, p, d.T, d.K, d.H, d.dtype, F(out));
}

void CpuOps::combine_fwd_f32(const Dims& d, const void* y_send, const int32_t* send_pos,
                             const float* p, float* out) {
  cpu::unpermute_combine(F(y_send), send_pos, p, d.T, d.K, d.H, DType::kFp32, out);
}

void CpuOps::to_storage(const Dims& d, const float* src, int64_t n, void* dst) {
  for (int64_t i = 0; i < n; ++i) F(dst)[i] = cpu::store_as(d.dtype, src[i]);
}

void CpuOps::combine_bwd(const Dims& d, const void* dout, const void* y_send,
                         const int32_t* send_pos, const float* p, void* dy_send, float* dp) {
  cpu::unpermute_combine_bwd(F(dout), F(y_send), send_pos, p, d.T, d.K, d.H, d.dtype, F(dy_send),
                             dp);
}

void CpuOps::unpermute_sum(const Dims& d, const void* dx_send, const int32_t* send_pos,
                           float* dx_acc) {
  cpu::unpermute_sum(F(dx_send), send_pos, d.T, d.K, d.H, dx_acc);
}

void CpuOps::unpermute_sum_storage(const Dims& d, const void* src, const int32_t* send_pos,
                                   void* dst) {
  cpu::unpermute_sum_storage(F(src), send_pos, d.T, d.K, d.H, d.dtype, F(dst));
}

void CpuOps::shared_sum_out(const Dims& d, int64_t S, const void* y_sh, void* out) {
  cpu::shared_sum_out(F(y_sh), S, d.T * d.H, d.dtype, F(out));
}

void CpuOps::shared_sum_dx(const Dims& d, int64_t S, const void* dx_sh, float* dx_acc) {
  cpu::shared_sum_dx(F(dx_sh), S, d.T * d.H, dx_acc);
}

}  // namespace moe
