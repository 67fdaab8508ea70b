#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/router_scratch.h"
#include "kernels/cuda/combine.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/expert_ffn.h"
#include "kernels/cuda/fp8_quantize.h"
#include "kernels/cuda/gemm_bench.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/layout.h"
#include "kernels/cuda/permute.h"
#include "kernels/cuda/router.h"
#include "kernels/cuda/router_grads.h"
#include "kernels/cuda/shared_sum.h"
#include "kernels/cuda/storage.cuh"

namespace moe {
namespace {

enum ScratchSlot {
  kRouterScratch,
  kRouterGrads,
  kRegroupOffsets,
  kLayoutScratch,
  kDedupScratch,
  kFp8CodesA,
  kFp8CodesDyT,
  kFp8CodesDhT,
  kFp8ScalesA,
  kFp8ScalesDyT,
  kFp8ScalesDhT,
  kNumScratchSlots
};

cuda::GemmMethod method_named(const std::string& name) {
  cuda::GemmMethod m = cuda::GemmMethod::kLtMultiStream;
  MOE_CHECK(cuda::gemm_method_from_name(name, &m), "unknown expert GEMM method " << name);
  return m;
}

}  // namespace

CudaOps::CudaOps(CudaDevice& device, const GemmConfig& gemm, bool sync_free, Precision precision)
    : device_(device), precision_(precision), scratch_(kNumScratchSlots) {
  gemm_ = std::make_unique<cuda::GemmRunner>(int(gemm.streams));
  gemm_->set_sm90_schedule(cuda::schedule_of(gemm));
  gemm_->set_sm90_fuse_swiglu(gemm.sm90_fuse_swiglu);
  sm90_ = cuda::GroupedGemm::runs_on_current_device();
  fixed_gemm_method_ = gemm.method != GemmMethod::kAuto || sync_free;
  if (gemm.method != GemmMethod::kAuto) gemm_->set_method(method_named(name_of(gemm.method)));
  for (int g = 0; g < kNumExpertGemms; ++g)
    if (gemm.methods[size_t(g)] != GemmMethod::kAuto)
      gemm_->set_method(ExpertGemm(g), method_named(name_of(gemm.methods[size_t(g)])));
  if (sync_free) {
    MOE_USER_CHECK(sm90_ && device.storage_dtype() == DType::kBf16,
                   "graph = true runs the expert GEMMs on the grouped sm90 kernel, which needs "
                   "an H100 or H200 (sm_90) and dtype bf16: set graph=false");
    gemm_->set_method(cuda::GemmMethod::kGroupedSm90);
  }
  gemm_->set_algo_policy(cuda::algo_policy_of(gemm.algo));
}

ExpertGemmMethods CudaOps::current_expert_gemm_methods() const {
  ExpertGemmMethods m;
  for (int g = 0; g < kNumExpertGemms; ++g)
    m[size_t(g)] = cuda::gemm_method_name(gemm_->method(ExpertGemm(g)));
  return m;
}

void CudaOps::time_expert_gemms(bool on) { gemm_->clock().set_on(on); }

ExpertGemmMs CudaOps::expert_gemm_ms() { return gemm_->clock().take(); }

GemmPlanCounts CudaOps::gemm_plan_counts() const {
  return {int64_t(gemm_->num_cached_plans()), gemm_->num_heuristic_queries(), gemm_->num_tunings()};
}

std::vector<std::string> CudaOps::expert_gemm_methods() const {
  if (fixed_gemm_method_) return {};
  std::vector<std::string> methods = {cuda::gemm_method_name(cuda::GemmMethod::kLtMultiStream)};
  // FP8 GEMMs have no cuBLAS grouped call; the grouped sm90 kernel takes bf16 storage (and
  // both FP8 recipes' codes), on Hopper.
  if (precision_ == Precision::kBf16)
    methods.push_back(cuda::gemm_method_name(cuda::GemmMethod::kGroupedBatched));
  if (sm90_ && device_.storage_dtype() == DType::kBf16)
    methods.push_back(cuda::gemm_method_name(cuda::GemmMethod::kGroupedSm90));
  return methods;
}

void CudaOps::set_expert_gemm_methods(const ExpertGemmMethods& methods) {
  for (int g = 0; g < kNumExpertGemms; ++g)
    gemm_->set_method(ExpertGemm(g), method_named(methods[size_t(g)]));
}

CudaOps::~CudaOps() {
  for (Scratch& sc : scratch_) device_.release(sc.ptr);
  for (KeptMap* kept : {&kept_xe_t_, &kept_a_t_})
    for (auto& [operand, k] : *kept) device_.release(k.memory.ptr);
  for (PreparedWeights& p : prepared_) device_.release(p.memory.ptr);
  gemm_.reset();
}

double CudaOps::time_dense_gemm_ms(int64_t M, int64_t N, int64_t K, int iters) {
  MOE_CHECK(M > 0 && N > 0 && K > 0 && iters > 0,
            "dense GEMM calibration " << M << "x" << N << "x" << K << ", " << iters << " iters");
  const DType dtype = device_.storage_dtype();
  const size_t sb = device_.storage_bytes();
  void* a = device_.alloc(sb * M * K);
  void* b = device_.alloc(sb * K * N);
  void* c = device_.alloc(sb * M * N);
  cuda::fill_calibration_pattern(a, M * K, 1, dtype, stream());
  cuda::fill_calibration_pattern(b, K * N, 2, dtype, stream());
  auto gemm = [&] { gemm_->gemm(false, false, M, N, K, a, b, c, false, dtype, dtype, stream()); };
  gemm();  // untimed: builds the cuBLASLt plan and wakes the clocks
  const double ms = median_call_ms(*device_.make_timer({"calibration_gemm"}), iters, gemm);
  device_.release(a);
  device_.release(b);
  device_.release(c);
  return ms;
}

double CudaOps::time_dense_fp8_gemm_ms(int64_t M, int64_t N, int64_t K, Fp8Recipe recipe,
                                       int iters) {
  MOE_CHECK(M > 0 && N > 0 && K > 0 && iters > 0,
            "FP8 GEMM calibration " << M << "x" << N << "x" << K << ", " << iters << " iters");
  // cuBLASLt's FP8 matmul as the expert loop calls it (kernels/cuda/gemm_bench.h).
  const cuda::DenseFp8Bytes bytes = cuda::dense_fp8_gemm_bytes(M, N, K, recipe);
  auto* a = static_cast<uint8_t*>(device_.alloc(bytes.a));
  auto* b = static_cast<uint8_t*>(device_.alloc(bytes.b));
  void* c = device_.alloc(device_.storage_bytes() * M * N);
  auto* sa = static_cast<float*>(device_.alloc(bytes.a_scales));
  auto* sb = static_cast<float*>(device_.alloc(bytes.b_scales));
  const cuda::Fp8Problem p =
      cuda::dense_fp8_gemm_problem(M, N, K, recipe, a, b, sa, sb, c, stream());
  const cuda::Fp8Scaling scaling = cuda::dense_fp8_scaling(recipe);
  auto gemm = [&] { gemm_->grouped_fp8({p}, scaling, false, device_.storage_dtype(), stream()); };
  gemm();  // untimed: builds the cuBLASLt plan and wakes the clocks
  const double ms = median_call_ms(*device_.make_timer({"calibration_fp8_gemm"}), iters, gemm);
  device_.release(a);
  device_.release(b);
  device_.release(c);
  device_.release(sa);
  device_.release(sb);
  return ms;
}

void* CudaOps::scratch(int slot, size_t bytes) {
  Scratch& s = scratch_[slot];
  if (bytes > s.bytes || !s.ptr) {
    device_.release(s.ptr);
    s.bytes = std::max<size_t>(bytes, 16);
    s.ptr = device_.alloc(s.bytes);
  }
  return s.ptr;
}

void CudaOps::router_fwd(const Dims& d, const RouterConfig& cfg, const void* x, const void* w_gate,
                         const float* expert_bias, const int32_t* forced_idx, float* logits,
                         float* scores, int32_t* idx, float* p, float* stats) {
  // logits in fp32 from the stored values: bf16 products are exact in fp32.
  gemm_->gemm(false, false, d.T, d.E, d.H, x, w_gate, logits, false, d.dtype, DType::kFp32,
              stream());
  cuda::router_topk(logits, expert_bias, forced_idx, cfg, d.T, d.E, d.K, scores, idx, p, stream());
  void* tmp = scratch(kRouterScratch, cuda::router_loss_stats_scratch_bytes(d.T, d.E));
  cuda::router_loss_stats(logits, scores, idx, cfg, d.T, d.E, d.K, stats, tmp, stream());
}

void CudaOps::router_bwd(const Dims& d, const RouterConfig& cfg, const void* x, const void* w_gate,
                         const float* logits, const float* scores, const int32_t* idx,
                         const float* dp, const float* global_stats, float* dlogits, float* dx_acc,
                         void* dx, float* dw_gate) {
  cuda::router_bwd(logits, scores, idx, dp, global_stats, cfg, d.N, d.T, d.E, d.K, dlogits,
                   stream());
  // The router's backward GEMMs in fp32 math (kernels/cuda/router_grads.h says how).
  void* tmp = scratch(kRouterGrads, cuda::router_grads_scratch_bytes(d.T, d.H, d.E, d.dtype));
  cuda::router_grads(*gemm_, dlogits, x, w_gate, d.T, d.H, d.E, d.dtype, dx_acc, dw_gate, tmp,
                     stream());
  cuda::f32_to_storage(dx_acc, d.T * d.H, d.dtype, dx, stream());
}

void CudaOps::experts_to_slots(const Dims& d, const int32_t* idx, const int32_t* slot_of,
                               int32_t* slots) {
  cuda::experts_to_slots(idx, d.T * d.K, slot_of, slots, stream());
}

void CudaOps::dispatch_layout(const Dims& d, const int32_t* idx, const float* p,
                              int32_t* expert_counts, int32_t* send_pos) {
  // T, K and E are fixed, so the first (warm-up) step allocates the scratch and later steps reuse
  // it, as with the router's (the memory estimate counts it: core/router_scratch.h).
  void* tmp = scratch(kLayoutScratch, dispatch_layout_scratch_bytes(d.T, d.K, d.E));
  cuda::dispatch_layout(idx, p, d.T, d.K, d.E, d.capacity, d.drop_by_position, expert_counts,
                        send_pos, tmp, stream());
}

void CudaOps::expert_major_positions(const Dims& d, const int32_t* send_pos, const int32_t* starts,
                                     const int32_t* dest, int32_t* pos) {
  cuda::expert_major_positions(send_pos, starts, dest, d.ep, d.T * d.K, d.E_local, pos, stream());
}

void CudaOps::dedup_layout(const Dims& d, const int32_t* idx, const float* p,
                           const int32_t* expert_counts, const int32_t* send_pos, int32_t* wire_pos,
                           int32_t* wire_counts, int32_t* slots, float* weights) {
  void* tmp = scratch(kDedupScratch, cuda::dedup_layout_scratch_bytes(d.T, d.ep));
  cuda::dedup_layout(idx, p, expert_counts, send_pos, d.T, d.K, d.E, d.ep, wire_pos, wire_counts,
                     slots, weights, tmp, stream());
}

void CudaOps::pack_fp8_rows(const Dims& d, const void* x, int64_t n, void* packed) {
  cuda::pack_fp8_rows(x, n, d.H, packed, stream());
}

void CudaOps::permute(const Dims& d, const void* x, const int32_t* send_pos, void* send) {
  cuda::permute_rows(x, send_pos, d.T, d.K, d.H, d.dtype, send, stream());
}

void CudaOps::expert_offsets(const Dims& d, const int32_t* counts, int64_t stride,
                             int64_t* offsets) {
  cuda::expert_offsets(counts, d.ep, stride, d.E_local, d.align, offsets, stream());
}

void CudaOps::expert_blocks(const Dims& d, const int32_t* counts, int64_t stride, int64_t first,
                            int32_t* table, int64_t* offsets) {
  cuda::expert_blocks(counts, d.ep, stride, first, d.E_local, d.align, table, offsets, stream());
}

void CudaOps::merge_chunk_layout(const Dims& d, const std::vector<ChunkRows>& chunks,
                                 int64_t* offsets, int64_t* blocks) {
  cuda::merge_chunk_layout(chunks.data(), int64_t(chunks.size()), d.ep, d.E_local, d.align, offsets,
                           blocks, stream());
}

namespace {
cuda::RankPointers rank_pointers(const RankBases& b) {
  static_assert(sizeof(cuda::RankPointers::at) == sizeof(RankBases::at), "one pointer per rank");
  cuda::RankPointers p{};
  for (int r = 0; r < kMaxWindowRanks; ++r) p.at[r] = b.at[r];
  return p;
}
}  // namespace

void CudaOps::rows_to_ranks(const Dims& d, const void* src, size_t row_bytes,
                            const int32_t* wire_pos, int64_t first_row, const RankBases& to) {
  cuda::rows_to_ranks(src, row_bytes, wire_pos, d.T, d.ep, first_row, rank_pointers(to), stream());
}

void CudaOps::rows_to_sources(const Dims& d, const void* src, size_t row_bytes,
                              const int32_t* wire_pos_all, int64_t me, const RankBases& to) {
  cuda::rows_to_sources(src, row_bytes, wire_pos_all, d.T, d.ep, me, rank_pointers(to), stream());
}

void CudaOps::gather_chunk_rows(const Dims& d, int64_t chunks, const int64_t* offsets,
                                const int64_t* blocks, int64_t rows_bound, const void* src,
                                size_t row_bytes, void* dst) {
  cuda::gather_chunk_rows(offsets, blocks, chunks, d.ep, d.E_local, rows_bound, src, row_bytes, dst,
                          stream());
}

void CudaOps::zero_expert_padding(const Dims& d, const int32_t* rows, const int64_t* offsets,
                                  void* expert_major) {
  cuda::zero_expert_padding(rows, offsets, d.E_local, d.H, d.align, d.dtype, expert_major,
                            stream());
}

void CudaOps::regroup(const Dims& d, const void* src, const int32_t* counts, int64_t rows_bound,
                      bool to_expert_major, void* dst) {
  auto* offsets = static_cast<int64_t*>(scratch(kRegroupOffsets, 16 * d.ep * d.E_local));
  cuda::regroup_rows(src, counts, d.ep, d.E_local, d.H, d.align, rows_bound, to_expert_major,
                     d.dtype, offsets, dst, stream());
}

cuda::Fp8Scratch CudaOps::fp8_scratch(const Dims& d, const ExpertOffsets& rows) {
  const cuda::Fp8ScratchBytes b = cuda::fp8_scratch_bytes(rows.rows_bound, d.E_local, d.H, d.F);
  cuda::Fp8Scratch sc;
  sc.a = static_cast<uint8_t*>(scratch(kFp8CodesA, b.a));
  sc.dy_t = static_cast<uint8_t*>(scratch(kFp8CodesDyT, b.dy_t));
  sc.dh_t = static_cast<uint8_t*>(scratch(kFp8CodesDhT, b.dh_t));
  sc.a_scales = static_cast<float*>(scratch(kFp8ScalesA, b.a_scales));
  sc.dy_t_scales = static_cast<float*>(scratch(kFp8ScalesDyT, b.dy_t_scales));
  sc.dh_t_scales = static_cast<float*>(scratch(kFp8ScalesDhT, b.dh_t_scales));
  return sc;
}

cuda::Fp8Transposed CudaOps::keep_in(KeptMap& kept, const void* operand,
                                     const Fp8KeptBytes& bytes) {
  // An operand moves when its buffer grows: a new one takes over the memory of codes already
  // taken, so the entries stay as many as there are forwards before the first weight gradient.
  if (!kept.count(operand)) {
    auto taken =
        std::find_if(kept.begin(), kept.end(), [](const auto& e) { return !e.second.fresh; });
    KeptCodes reused;
    if (taken != kept.end()) {
      reused = taken->second;
      kept.erase(taken);
    }
    kept.emplace(operand, reused);
  }
  KeptCodes& k = kept[operand];
  if (bytes.total() > k.memory.bytes || !k.memory.ptr) {
    device_.release(k.memory.ptr);
    k.memory.bytes = bytes.total();
    k.memory.ptr = device_.alloc(k.memory.bytes);
  }
  k.codes = cuda::kept_codes_at(k.memory.ptr, bytes);
  k.fresh = true;
  return k.codes;
}

cuda::Fp8Kept CudaOps::keep_codes(const Dims& d, const ExpertOffsets& rows, const void* xe,
                                  const void* a) {
  if (!d.weight_grads_on_fwd_rows) return {};
  const cuda::Fp8ScratchBytes b = cuda::fp8_scratch_bytes(rows.rows_bound, d.E_local, d.H, d.F);
  cuda::Fp8Kept keep;
  // Packed rows (dispatch_dtype fp8) arrive as codes: their weight gradient reads them as such.
  if (!d.dispatch_fp8) keep.xe_t = keep_in(kept_xe_t_, xe, b.xe_t);
  keep.a_t = keep_in(kept_a_t_, a, b.a_t);
  return keep;
}

cuda::Fp8Kept CudaOps::take_codes(const void* xe, const void* a) {
  auto take = [](KeptMap& kept, const void* operand) -> cuda::Fp8Transposed {
    auto it = kept.find(operand);
    if (it == kept.end() || !it->second.fresh) return {};
    it->second.fresh = false;
    return it->second.codes;
  };
  return {take(kept_xe_t_, xe), take(kept_a_t_, a)};
}

void CudaOps::prepare_expert_weights(const Dims& d, int64_t G, const void* w_in,
                                     const void* w_out) {
  if (d.precision == Precision::kBf16) return;
  auto it = std::find_if(prepared_.begin(), prepared_.end(),
                         [&](const PreparedWeights& p) { return p.w_in == w_in; });
  if (it == prepared_.end()) it = prepared_.insert(prepared_.end(), PreparedWeights{});
  PreparedWeights& p = *it;
  const size_t bytes = cuda::fp8_weights_bytes(G, d.H, d.F);
  if (bytes > p.memory.bytes) {
    device_.release(p.memory.ptr);
    p.memory = {device_.alloc(bytes), bytes};
  }
  p.w_in = w_in;
  p.w_out = w_out;
  p.G = G;
  p.H = d.H;
  p.F = d.F;
  p.fp8 = cuda::quantize_ffn_weights_fp8(w_in, w_out, G, d.H, d.F, fp8_recipe_of(d.precision),
                                         p.memory.ptr, stream());
}

cuda::Fp8Weights CudaOps::fp8_weights(const Dims& d, const void* w_in, const void* w_out) const {
  const size_t in_bytes = size_t(d.H * 2 * d.F) * 2, out_bytes = size_t(d.F * d.H) * 2;
  for (const PreparedWeights& p : prepared_) {
    const auto* base = static_cast<const char*>(p.w_in);
    const auto* at = static_cast<const char*>(w_in);
    if (p.H != d.H || p.F != d.F || at < base || at >= base + size_t(p.G) * in_bytes) continue;
    const int64_t first = int64_t(size_t(at - base) / in_bytes);
    MOE_CHECK(size_t(at - base) % in_bytes == 0 &&
                  static_cast<const char*>(p.w_out) + size_t(first) * out_bytes == w_out,
              "FP8 expert FFN: weights at an offset no expert of the prepared set starts at");
    return cuda::fp8_weights_from(p.fp8, first, d.H, d.F, fp8_recipe_of(d.precision));
  }
  MOE_CHECK(false,
            "FP8 expert FFN: its weights were not prepared "
            "(Ops::prepare_expert_weights)");
  return {};
}

void CudaOps::expert_ffn_fwd(const Dims& d, const void* xe, const void* w_in, const void* w_out,
                             const ExpertOffsets& off, void* h, void* a, void* ye) {
  if (d.precision != Precision::kBf16) {
    cuda::expert_ffn_fwd_fp8(xe, fp8_weights(d, w_in, w_out), off, d.E_local, d.H, d.F,
                             fp8_recipe_of(d.precision), h, a, ye, *gemm_, fp8_scratch(d, off),
                             stream(), d.dispatch_fp8, keep_codes(d, off, xe, a), fp8_scales_);
    return;
  }
  cuda::expert_ffn_fwd(xe, w_in, w_out, off, d.E_local, d.H, d.F, d.dtype, h, a, ye, *gemm_,
                       gemm_lists_, stream());
}

void CudaOps::expert_ffn_bwd_data(const Dims& d, const void* dye, const void* h, const void* w_in,
                                  const void* w_out, const ExpertOffsets& off, void* da, void* dh,
                                  void* dxe) {
  if (d.precision != Precision::kBf16) {
    cuda::expert_ffn_bwd_data_fp8(dye, h, fp8_weights(d, w_in, w_out), off, d.E_local, d.H, d.F,
                                  fp8_recipe_of(d.precision), da, dh, dxe, *gemm_,
                                  fp8_scratch(d, off), stream(), fp8_scales_);
    fp8_dy_dh_left_ = {dye, dh, off.device};
    return;
  }
  cuda::expert_ffn_bwd_data(dye, h, w_in, w_out, off, d.E_local, d.H, d.F, d.dtype, da, dh, dxe,
                            *gemm_, gemm_lists_, stream());
}

void CudaOps::expert_ffn_bwd_weights(const Dims& d, const void* dye, const void* xe, const void* a,
                                     const void* dh, const ExpertOffsets& off, void* dw_in,
                                     void* dw_out) {
  if (d.precision != Precision::kBf16) {
    // The codes the data gradients left serve only the rows they quantized.
    const bool left = fp8_dy_dh_left_ == Fp8DyDh{dye, dh, off.device};
    fp8_dy_dh_left_ = {};
    cuda::expert_ffn_bwd_weights_fp8(xe, a, dye, dh, left, off, d.E_local, d.H, d.F,
                                     fp8_recipe_of(d.precision), d.grad_dtype, dw_in, dw_out, false,
                                     *gemm_, fp8_scratch(d, off), stream(), d.dispatch_fp8,
                                     take_codes(xe, a));
    return;
  }
  cuda::expert_ffn_bwd_weights(dye, xe, a, dh, off, d.E_local, d.H, d.F, d.dtype, d.grad_dtype,
                               dw_in, dw_out, false, *gemm_, gemm_lists_, stream());
}

void CudaOps::combine_fwd(const Dims& d, const void* y_send, const int32_t* send_pos,
                          const float* p, void* out) {
  cuda::unpermute_combine(y_send, send_pos, p, d.T, d.K, d.H, d.dtype, out, stream());
}

void CudaOps::combine_fwd_f32(const Dims& d, const void* y_send, const int32_t* send_pos,
                              const float* p, float* out) {
  cuda::unpermute_combine_f32(y_send, send_pos, p, d.T, d.K, d.H, d.dtype, out, stream());
}

void CudaOps::to_storage(const Dims& d, const float* src, int64_t n, void* dst) {
  cuda::f32_to_storage(src, n, d.dtype, dst, stream());
}

void CudaOps::combine_bwd(const Dims& d, const void* dout, const void* y_send,
                          const int32_t* send_pos, const float* p, void* dy_send, float* dp) {
  cuda::unpermute_combine_bwd(dout, y_send, send_pos, p, d.T, d.K, d.H, d.dtype, dy_send, dp,
                              stream());
}

void CudaOps::unpermute_sum(const Dims& d, const void* dx_send, const int32_t* send_pos,
                            float* dx_acc) {
  cuda::unpermute_sum(dx_send, send_pos, d.T, d.K, d.H, d.dtype, dx_acc, stream());
}

void CudaOps::unpermute_sum_storage(const Dims& d, const void* src, const int32_t* send_pos,
                                    void* dst) {
  cuda::unpermute_sum_storage(src, send_pos, d.T, d.K, d.H, d.dtype, dst, stream());
}

void CudaOps::shared_sum_out(const Dims& d, int64_t S, const void* y_sh, void* out) {
  cuda::shared_sum_out(y_sh, S, d.T * d.H, d.dtype, out, stream());
}

void CudaOps::shared_sum_dx(const Dims& d, int64_t S, const void* dx_sh, float* dx_acc) {
  cuda::shared_sum_dx(dx_sh, S, d.T * d.H, d.dtype, dx_acc, stream());
}

}  // namespace moe
