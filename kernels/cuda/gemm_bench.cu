#include <algorithm>
#include <functional>

#include "core/error.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/expert_ffn.h"
#include "kernels/cuda/expert_ffn_fp8.h"
#include "kernels/cuda/gemm_bench.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/storage.cuh"

namespace moe::cuda {
namespace {

// Device memory freed on scope exit.
struct Buffer {
  void* ptr = nullptr;
  explicit Buffer(size_t bytes) { CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(bytes, 16))); }
  ~Buffer() { cudaFree(ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// The median of `iters` timed calls of fn on `stream`, after two untimed ones. Unlike
// median_call_ms (core/device.h), calls are queued back to back with an event between each, so
// that the host's wait for one call does not leave the GPU idle before the next.
double median_ms(cudaStream_t stream, int iters, const std::function<void()>& fn) {
  fn();
  fn();
  std::vector<cudaEvent_t> ev(size_t(iters) + 1);
  for (cudaEvent_t& e : ev) CUDA_CHECK(cudaEventCreate(&e));
  CUDA_CHECK(cudaEventRecord(ev[0], stream));
  for (int i = 0; i < iters; ++i) {
    fn();
    CUDA_CHECK(cudaEventRecord(ev[size_t(i) + 1], stream));
  }
  CUDA_CHECK(cudaEventSynchronize(ev.back()));
  std::vector<double> ms(size_t(iters), 0.0);
  for (int i = 0; i < iters; ++i) {
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, ev[size_t(i)], ev[size_t(i) + 1]));
    ms[size_t(i)] = t;
  }
  for (cudaEvent_t e : ev) cudaEventDestroy(e);
  std::nth_element(ms.begin(), ms.begin() + iters / 2, ms.end());
  return ms[size_t(iters / 2)];
}

GemmMethod method_named(const std::string& name) {
  GemmMethod m = GemmMethod::kLtMultiStream;
  MOE_USER_CHECK(gemm_method_from_name(name, &m),
                 "moebench gemm: unknown method '"
                     << name << "' (lt_multistream, grouped_batched or grouped_sm90)");
  return m;
}

}  // namespace

DenseFp8Bytes dense_fp8_gemm_bytes(int64_t M, int64_t N, int64_t K, Fp8Recipe recipe) {
  // Per tensor, one scale each; in blocks, A's 1 x 128 along K and B's 128 x 128 tiles.
  const bool tensor = recipe == Fp8Recipe::kTensor;
  const int64_t kb = (K + kFp8Block - 1) / kFp8Block, nb = (N + kFp8Block - 1) / kFp8Block;
  return {size_t(M * K), size_t(N * K), 4 * size_t(tensor ? 1 : M * kb),
          4 * size_t(tensor ? 1 : nb * kb)};
}

Fp8Problem dense_fp8_gemm_problem(int64_t M, int64_t N, int64_t K, Fp8Recipe recipe, uint8_t* a,
                                  uint8_t* b, float* a_scales, float* b_scales, void* c,
                                  cudaStream_t stream) {
  const DenseFp8Bytes bytes = dense_fp8_gemm_bytes(M, N, K, recipe);
  fill_fp8_calibration_pattern(a, M * K, 1, stream);
  fill_fp8_calibration_pattern(b, N * K, 2, stream);
  const std::vector<float> ones(std::max(bytes.a_scales, bytes.b_scales) / 4, 1.0f);
  CUDA_CHECK(
      cudaMemcpyAsync(a_scales, ones.data(), bytes.a_scales, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(
      cudaMemcpyAsync(b_scales, ones.data(), bytes.b_scales, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));  // `ones` is read before it goes
  return {M, N, K, {a, K, a_scales}, {b, K, b_scales}, c};
}

Fp8Scaling dense_fp8_scaling(Fp8Recipe recipe) {
  return recipe == Fp8Recipe::kTensor ? Fp8Scaling::kTensor : Fp8Scaling::kRowsTimesTiles;
}

std::vector<ExpertGemmBenchRow> bench_expert_gemms(const ExpertGemmBenchShape& shape,
                                                   const std::vector<std::string>& methods,
                                                   int iters) {
  const int64_t El = shape.E_local, H = shape.H, F = shape.F;
  MOE_CHECK(El > 0 && int64_t(shape.rows.size()) == El && iters > 0, "bench_expert_gemms args");
  std::vector<int64_t> off(El + 1, 0);
  for (int64_t l = 0; l < El; ++l) off[l + 1] = off[l] + shape.rows[l];
  const int64_t R = off[El];
  const DType bf = DType::kBf16, gd = shape.grad_dtype;
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // The step's buffers: rows operands [R, *], weights and their gradients [El, *, *].
  Buffer xe(2 * R * H), h(2 * R * 2 * F), a(2 * R * F), ye(2 * R * H), dye(2 * R * H);
  Buffer da(2 * R * F), dh(2 * R * 2 * F), dxe(2 * R * H);
  Buffer w_in(2 * El * H * 2 * F), w_out(2 * El * F * H);
  Buffer dw_in(stored_bytes(gd) * El * H * 2 * F), dw_out(stored_bytes(gd) * El * F * H);
  Buffer off_dev(8 * (El + 1));
  CUDA_CHECK(cudaMemcpy(off_dev.ptr, off.data(), 8 * (El + 1), cudaMemcpyHostToDevice));
  uint32_t salt = 1;
  for (auto [buf, n] : {std::pair{&xe, R * H},
                        {&h, R * 2 * F},
                        {&a, R * F},
                        {&dye, R * H},
                        {&dh, R * 2 * F},
                        {&w_in, El * H * 2 * F},
                        {&w_out, El * F * H}})
    fill_calibration_pattern(buf->ptr, n, salt++, bf, stream);

  struct Gemm {
    const char* name;
    GroupedLayout layout;
    int64_t M, N, K;  // the group-dependent one is 0
    const void *A, *B;
    void* C;
    DType out;
  };
  const auto RW = GroupedLayout::kRowsTimesWeight, RWT = GroupedLayout::kRowsTimesWeightT,
             RTR = GroupedLayout::kRowsTTimesRows;
  // In ExpertGemm order.
  const Gemm gemms[kNumExpertGemms] = {
      {expert_gemm_name(ExpertGemm::kUp), RW, 0, 2 * F, H, xe.ptr, w_in.ptr, h.ptr, bf},
      {expert_gemm_name(ExpertGemm::kDown), RW, 0, H, F, a.ptr, w_out.ptr, ye.ptr, bf},
      {expert_gemm_name(ExpertGemm::kDgradA), RWT, 0, F, H, dye.ptr, w_out.ptr, da.ptr, bf},
      {expert_gemm_name(ExpertGemm::kDgradX), RWT, 0, H, 2 * F, dh.ptr, w_in.ptr, dxe.ptr, bf},
      {expert_gemm_name(ExpertGemm::kWgradOut), RTR, F, H, 0, a.ptr, dye.ptr, dw_out.ptr, gd},
      {expert_gemm_name(ExpertGemm::kWgradIn), RTR, H, 2 * F, 0, xe.ptr, dh.ptr, dw_in.ptr, gd}};
  const double mean_rows = double(R) / double(El);
  // A GEMM's row of the table: its shape at the mean rows per expert, and its FLOPs.
  auto row_of = [&](const Gemm& g, const std::string& method) {
    const bool rows_k = g.layout == RTR;
    ExpertGemmBenchRow row;
    row.gemm = g.name;
    row.method = method;
    row.M = rows_k ? g.M : int64_t(mean_rows);
    row.N = g.N;
    row.K = rows_k ? int64_t(mean_rows) : g.K;
    row.flops = 2.0 * double(R) * double(g.N) * double(rows_k ? g.M : g.K);
    return row;
  };

  std::vector<ExpertGemmBenchRow> out;
  GemmRunner runner(shape.streams);
  runner.set_sm90_schedule(shape.sm90);
  runner.set_algo_policy(shape.algo);
  std::vector<GemmProblem> list;
  const ExpertOffsets rows{static_cast<const int64_t*>(off_dev.ptr), off.data(), off[El]};
  for (const std::string& name : methods) {
    runner.set_method(method_named(name));
    for (const Gemm& g : gemms) {
      ExpertGemmBenchRow row = row_of(g, name);
      row.median_ms = median_ms(stream, iters, [&] {
        experts_gemm(g.layout, rows, El, g.M, g.N, g.K, g.A, g.B, g.C, bf, g.out, runner, list,
                     stream);
      });
      out.push_back(row);
    }
  }
  if (shape.precision != Precision::kBf16) {
    const Fp8Recipe recipe = fp8_recipe_of(shape.precision);
    const std::string precision = name_of(shape.precision);
    Buffer wq(fp8_weights_bytes(El, H, F));
    const Fp8ScratchBytes b = fp8_scratch_bytes(R, El, H, F);
    Buffer sa(b.a), sdy(b.dy_t), sdh(b.dh_t), ssa(b.a_scales), ssdy(b.dy_t_scales),
        ssdh(b.dh_t_scales);
    const Fp8Scratch sc{static_cast<uint8_t*>(sa.ptr),  static_cast<uint8_t*>(sdy.ptr),
                        static_cast<uint8_t*>(sdh.ptr), static_cast<float*>(ssa.ptr),
                        static_cast<float*>(ssdy.ptr),  static_cast<float*>(ssdh.ptr)};
    // xe's and a's transposed codes, which the step's forward writes beside their row codes and
    // keeps for the weight gradients (CudaOps): up and down write them here too, and wgrad_in and
    // wgrad_out take them, quantizing nothing, so that each row costs what the step pays.
    Buffer kxe(b.xe_t.total()), ka(b.a_t.total());
    const Fp8Kept kept{kept_codes_at(kxe.ptr, b.xe_t), kept_codes_at(ka.ptr, b.a_t)};
    Fp8Weights w;
    ExpertGemmBenchRow weights{"weights", precision, shape.precision};
    weights.quantizes = true;
    weights.median_ms = weights.quantize_ms = median_ms(stream, iters, [&] {
      w = quantize_ffn_weights_fp8(w_in.ptr, w_out.ptr, El, H, F, recipe, wq.ptr, stream);
    });
    out.push_back(weights);
    // Per method that has an FP8 path: cuBLASLt's loop, the grouped kernel.
    for (const std::string& name : methods) {
      if (name == gemm_method_name(GemmMethod::kGroupedBatched)) continue;
      runner.set_method(method_named(name));
      for (int i = 0; i < kNumExpertGemms; ++i) {
        const Gemm& g = gemms[i];
        const auto which = ExpertGemm(i);
        ExpertGemmBenchRow row = row_of(g, precision + ":" + name);
        row.precision = shape.precision;
        row.quantizes = true;
        const Fp8Transposed keep_t = which == ExpertGemm::kUp     ? kept.xe_t
                                     : which == ExpertGemm::kDown ? kept.a_t
                                                                  : Fp8Transposed{};
        const Fp8Transposed* first = which == ExpertGemm::kWgradIn    ? &kept.xe_t
                                     : which == ExpertGemm::kWgradOut ? &kept.a_t
                                                                      : nullptr;
        const Fp8Scratch operands = first ? with_first_operand(sc, *first) : sc;
        if (!first) {
          row.quantize_ms = median_ms(stream, iters, [&] {
            quantize_fp8_gemm_operands(which, g.A, rows, El, H, F, recipe, sc, stream, false,
                                       keep_t);
          });
        }
        row.median_ms = row.quantize_ms + median_ms(stream, iters, [&] {
                          run_fp8_gemm(which, w, rows, El, H, F, recipe, g.out, false, g.C, runner,
                                       operands, stream);
                        });
        out.push_back(row);
      }
    }
  }
  // The dense references: one GEMM of the up projection's total size, in bf16 and in the recipe.
  const double dense_flops = 2.0 * double(R) * 2 * F * H;
  ExpertGemmBenchRow dense{"dense", "cublaslt", Precision::kBf16, R, 2 * F, H, dense_flops};
  dense.median_ms = median_ms(stream, iters, [&] {
    runner.gemm(false, false, R, 2 * F, H, xe.ptr, w_in.ptr, h.ptr, false, bf, bf, stream);
  });
  out.push_back(dense);
  if (shape.precision != Precision::kBf16) {
    const Fp8Recipe recipe = fp8_recipe_of(shape.precision);
    const DenseFp8Bytes b = dense_fp8_gemm_bytes(R, 2 * F, H, recipe);
    Buffer qa(b.a), qb(b.b), sa(b.a_scales), sb(b.b_scales);
    const Fp8Problem p = dense_fp8_gemm_problem(
        R, 2 * F, H, recipe, static_cast<uint8_t*>(qa.ptr), static_cast<uint8_t*>(qb.ptr),
        static_cast<float*>(sa.ptr), static_cast<float*>(sb.ptr), h.ptr, stream);
    ExpertGemmBenchRow fp8{"dense",    name_of(shape.precision), shape.precision, R, 2 * F, H,
                           dense_flops};
    fp8.median_ms = median_ms(stream, iters, [&] {
      runner.grouped_fp8({p}, dense_fp8_scaling(recipe), false, bf, stream);
    });
    out.push_back(fp8);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaStreamDestroy(stream));
  return out;
}

}  // namespace moe::cuda
