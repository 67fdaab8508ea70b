// The CUDA expert FFN with FP8 GEMMs (kernels/cuda/expert_ffn_fp8.h) against its CPU twin
// (kernels/cpu/expert_ffn.h with the same precision) on seeded random data with an empty expert,
// ragged rows (multiples of 16, as align 16 gives) and partial 128-blocks, both recipes, both
// gradient dtypes and accumulation. Both sides quantize the same bf16 values bit for bit
// (test_fp8_quantize_cuda), with every 128 x 128 block of each operand at its own magnitude so
// that a scale read from the wrong place shows (25-80% off). Hopper's FP8 tensor cores sum with
// less precision than fp32 (cuBLASLt's product of exact FP8 values is about 1e-4 off), so a bf16
// intermediate lands one ulp apart more often than in bf16 GEMMs, and now and then crosses an
// e4m3 rounding boundary further on: every tensor within 2e-2 of the twin (the recipes differ
// from each other and from bf16 by about 6%).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "core/fp8_scales.h"
#include "kernels/cpu/expert_ffn.h"
#include "kernels/cuda/expert_ffn_fp8.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "tests/cuda/gemm_test_util.h"

namespace moe::test {
namespace {

void expect_near_twin(const std::vector<float>& got, const std::vector<float>& want,
                      const std::string& what, double tol = 2e-2) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double e = rel_l2(got, want);
  std::printf("  %-36s rel_l2 %.3e\n", what.c_str(), e);
  EXPECT_LT(e, tol) << what;
}

// Values of a [rows, cols] operand in [-1, 1) scaled by 2^(0..4) per 128 x 128 block, so that
// every block has its own scale and a scale read from the wrong place shows.
std::vector<float> blocky_values(int64_t rows, int64_t cols, uint64_t seed) {
  std::vector<float> v = random_values(rows * cols, DType::kBf16, seed);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      v[r * cols + c] *= float(1 << ((r / 128 + 3 * (c / 128) + seed) % 5));
  return v;
}

using PerGemm = std::array<cuda::GemmMethod, kNumExpertGemms>;

PerGemm all_by(cuda::GemmMethod m) {
  PerGemm p;
  p.fill(m);
  return p;
}

// methods: each expert GEMM's (ExpertGemm order).
void check_fp8_ffn(Precision precision, DType grad_dtype, bool accumulate, const PerGemm& methods) {
  const DType dt = DType::kBf16;
  std::string what = std::string(name_of(precision)) + " grad " + dtype_name(grad_dtype) +
                     (accumulate ? " accumulate" : "");
  for (cuda::GemmMethod m : methods) what += std::string(" ") + cuda::gemm_method_name(m);
  SCOPED_TRACE(what);
  const std::vector<int64_t> rows = {64, 0, 160, 48};
  const int64_t El = int64_t(rows.size()), H = 256, F = 192;
  std::vector<int64_t> off(El + 1, 0);
  for (int64_t l = 0; l < El; ++l) off[l + 1] = off[l] + rows[l];
  const int64_t R = off[El];
  const std::vector<float> xe = blocky_values(R, H, 31);
  const std::vector<float> w_in = blocky_values(El * H, 2 * F, 32);
  const std::vector<float> w_out = blocky_values(El * F, H, 33);
  const std::vector<float> dye = blocky_values(R, H, 34);
  const std::vector<float> dw0 = random_values(El * H * 2 * F, DType::kFp32, 35);
  const std::vector<float> dwo0 = random_values(El * F * H, DType::kFp32, 36);

  std::vector<float> h(R * 2 * F), a(R * F), ye(R * H), da(R * F), dh(R * 2 * F), dxe(R * H);
  std::vector<float> dw_in = accumulate ? dw0 : std::vector<float>(El * H * 2 * F);
  std::vector<float> dw_out = accumulate ? dwo0 : std::vector<float>(El * F * H);
  cpu::expert_ffn_fwd(xe.data(), w_in.data(), w_out.data(), off.data(), El, H, F, dt, h.data(),
                      a.data(), ye.data(), precision);
  cpu::expert_ffn_bwd_data(dye.data(), h.data(), w_in.data(), w_out.data(), off.data(), El, H, F,
                           dt, da.data(), dh.data(), dxe.data(), precision);
  cpu::expert_ffn_bwd_weights(dye.data(), xe.data(), a.data(), dh.data(), off.data(), El, H, F,
                              grad_dtype, dw_in.data(), dw_out.data(), accumulate, precision);

  StorageBuf d_xe(dt, xe), d_w_in(dt, w_in), d_w_out(dt, w_out), d_dye(dt, dye);
  StorageBuf d_h(dt, R * 2 * F), d_a(dt, R * F), d_ye(dt, R * H), d_da(dt, R * F);
  StorageBuf d_dh(dt, R * 2 * F), d_dxe(dt, R * H);
  StorageBuf d_dw_in(grad_dtype, accumulate ? dw0 : std::vector<float>(El * H * 2 * F));
  StorageBuf d_dw_out(grad_dtype, accumulate ? dwo0 : std::vector<float>(El * F * H));
  DevBuf<int64_t> d_off(off);
  const cuda::Fp8ScratchBytes bytes = cuda::fp8_scratch_bytes(R, El, H, F);
  DevBuf<uint8_t> sa(bytes.a), sdy(bytes.dy_t), sdh(bytes.dh_t);
  DevBuf<float> ssa(bytes.a_scales / 4), ssdy(bytes.dy_t_scales / 4), ssdh(bytes.dh_t_scales / 4);
  const cuda::Fp8Scratch sc{sa.ptr, sdy.ptr, sdh.ptr, ssa.ptr, ssdy.ptr, ssdh.ptr};
  cuda::GemmRunner runner;
  for (int g = 0; g < kNumExpertGemms; ++g) runner.set_method(ExpertGemm(g), methods[g]);
  const ExpertOffsets er{d_off.ptr, off.data(), R};
  const Fp8Recipe recipe = fp8_recipe_of(precision);
  DevBuf<uint8_t> wq(cuda::fp8_weights_bytes(El, H, F));
  const cuda::Fp8Weights w =
      cuda::quantize_ffn_weights_fp8(d_w_in.ptr, d_w_out.ptr, El, H, F, recipe, wq.ptr, nullptr);
  DevBuf<float> report(size_t(kNumFp8Computed * El));  // fp8_tensor's reported scales
  cuda::expert_ffn_fwd_fp8(d_xe.ptr, w, er, El, H, F, recipe, d_h.ptr, d_a.ptr, d_ye.ptr, runner,
                           sc, nullptr, false, {}, report.ptr);
  cuda::expert_ffn_bwd_data_fp8(d_dye.ptr, d_h.ptr, w, er, El, H, F, recipe, d_da.ptr, d_dh.ptr,
                                d_dxe.ptr, runner, sc, nullptr, report.ptr);
  // The reported scales are those of the operands as stored (core/fp8_scales.h's, of the same
  // values), for every expert with rows; none with fp8_block.
  {
    const std::vector<float> got = report.host();
    std::vector<float> want(kNumFp8Computed * El, 0.0f);
    if (recipe == Fp8Recipe::kTensor) {
      fp8_group_tensor_scales(d_a.host().data(), off.data(), El, F, &want[0]);
      fp8_group_tensor_scales(dye.data(), off.data(), El, H, &want[El]);
      fp8_group_tensor_scales(d_dh.host().data(), off.data(), El, 2 * F, &want[2 * El]);
    }
    for (int64_t k = 0; k < kNumFp8Computed; ++k)
      for (int64_t l = 0; l < El; ++l)
        if (rows[l] > 0 || recipe != Fp8Recipe::kTensor)
          EXPECT_EQ(got[k * El + l], want[k * El + l])
              << what << " reported scale of " << name_of(Fp8Computed(k)) << ", expert " << l;
  }
  cuda::expert_ffn_bwd_weights_fp8(d_xe.ptr, d_a.ptr, d_dye.ptr, d_dh.ptr, true, er, El, H, F,
                                   recipe, grad_dtype, d_dw_in.ptr, d_dw_out.ptr, accumulate,
                                   runner, sc, nullptr);
  // h comes straight from quantized inputs that match bit for bit: the GEMM's own rounding only.
  expect_near_twin(d_h.host(), h, what + " h", 2e-3);
  for (const auto& [name, got, want] :
       {std::tuple<const char*, const StorageBuf*, const std::vector<float>*>{"a", &d_a, &a},
        {"ye", &d_ye, &ye},
        {"da", &d_da, &da},
        {"dh", &d_dh, &dh},
        {"dxe", &d_dxe, &dxe},
        {"dw_in", &d_dw_in, &dw_in},
        {"dw_out", &d_dw_out, &dw_out}})
    expect_near_twin(got->host(), *want, what + " " + name);

  // xe's and a's transposed codes kept from the forward: the same weight gradients bit for bit,
  // with xe and a overwritten before them (so that a weight gradient that read them would differ).
  DevBuf<uint8_t> kept_xe(bytes.xe_t.codes), kept_a(bytes.a_t.codes);
  DevBuf<float> kept_xe_scales(bytes.xe_t.scales / 4), kept_a_scales(bytes.a_t.scales / 4);
  const cuda::Fp8Kept kept{{kept_xe.ptr, kept_xe_scales.ptr}, {kept_a.ptr, kept_a_scales.ptr}};
  StorageBuf k_dw_in(grad_dtype, accumulate ? dw0 : std::vector<float>(El * H * 2 * F));
  StorageBuf k_dw_out(grad_dtype, accumulate ? dwo0 : std::vector<float>(El * F * H));
  cuda::expert_ffn_fwd_fp8(d_xe.ptr, w, er, El, H, F, recipe, d_h.ptr, d_a.ptr, d_ye.ptr, runner,
                           sc, nullptr, false, kept);
  cuda::expert_ffn_bwd_data_fp8(d_dye.ptr, d_h.ptr, w, er, El, H, F, recipe, d_da.ptr, d_dh.ptr,
                                d_dxe.ptr, runner, sc, nullptr);
  CUDA_CHECK(cudaMemset(d_a.ptr, 0x3f, size_t(R * F) * 2));  // bf16
  CUDA_CHECK(cudaMemset(d_xe.ptr, 0x3f, size_t(R * H) * 2));
  cuda::expert_ffn_bwd_weights_fp8(d_xe.ptr, d_a.ptr, d_dye.ptr, d_dh.ptr, true, er, El, H, F,
                                   recipe, grad_dtype, k_dw_in.ptr, k_dw_out.ptr, accumulate,
                                   runner, sc, nullptr, false, kept);
  EXPECT_EQ(k_dw_out.host(), d_dw_out.host()) << what << " dw_out from the kept codes";
  EXPECT_EQ(k_dw_in.host(), d_dw_in.host()) << what << " dw_in from the kept codes";

  // dye and dh quantized by the weight gradients themselves (rows the data gradients did not
  // see, a pipelined step's gathered ones): the codes left in the scratch overwritten first (xe
  // and a from their kept codes still, themselves being overwritten above).
  StorageBuf q_dw_in(grad_dtype, accumulate ? dw0 : std::vector<float>(El * H * 2 * F));
  StorageBuf q_dw_out(grad_dtype, accumulate ? dwo0 : std::vector<float>(El * F * H));
  CUDA_CHECK(cudaMemset(sdy.ptr, 0x3f, bytes.dy_t));
  CUDA_CHECK(cudaMemset(sdh.ptr, 0x3f, bytes.dh_t));
  CUDA_CHECK(cudaMemset(ssdy.ptr, 0x3f, bytes.dy_t_scales));
  CUDA_CHECK(cudaMemset(ssdh.ptr, 0x3f, bytes.dh_t_scales));
  cuda::expert_ffn_bwd_weights_fp8(d_xe.ptr, d_a.ptr, d_dye.ptr, d_dh.ptr, false, er, El, H, F,
                                   recipe, grad_dtype, q_dw_in.ptr, q_dw_out.ptr, accumulate,
                                   runner, sc, nullptr, false, kept);
  EXPECT_EQ(q_dw_out.host(), d_dw_out.host()) << what << " dw_out from dye quantized again";
  EXPECT_EQ(q_dw_in.host(), d_dw_in.host()) << what << " dw_in from dh quantized again";
}

TEST(ExpertFfnFp8Cuda, MatchesCpuTwin) {
  MOE_REQUIRE_GPU();
  for (Precision p : {Precision::kFp8Tensor, Precision::kFp8Block}) {
    const PerGemm lt = all_by(cuda::GemmMethod::kLtMultiStream);
    check_fp8_ffn(p, DType::kFp32, false, lt);
    check_fp8_ffn(p, DType::kBf16, false, lt);
    check_fp8_ffn(p, DType::kFp32, true, lt);
  }
}

// Both recipes' six GEMMs on the grouped sm90 kernel (weight gradients stored in either dtype or
// added into fp32).
TEST(ExpertFfnFp8Cuda, MatchesCpuTwinOnTheGroupedKernel) {
  MOE_REQUIRE_SM90();
  const PerGemm sm90 = all_by(cuda::GemmMethod::kGroupedSm90);
  for (Precision p : {Precision::kFp8Tensor, Precision::kFp8Block}) {
    check_fp8_ffn(p, DType::kBf16, false, sm90);
    check_fp8_ffn(p, DType::kFp32, false, sm90);
    check_fp8_ffn(p, DType::kFp32, true, sm90);
  }
}

// gemm.method auto's per-GEMM choice: each GEMM by its own method, the grouped kernel and
// cuBLASLt's loop taking turns, both ways round (the quantized operands are the same for both).
TEST(ExpertFfnFp8Cuda, MatchesCpuTwinWithEachGemmByItsOwnMethod) {
  MOE_REQUIRE_SM90();
  const auto own = cuda::GemmMethod::kGroupedSm90, lt = cuda::GemmMethod::kLtMultiStream;
  for (Precision p : {Precision::kFp8Tensor, Precision::kFp8Block})
    for (const PerGemm& mix :
         {PerGemm{own, lt, own, lt, own, lt}, PerGemm{lt, own, lt, own, lt, own}}) {
      check_fp8_ffn(p, DType::kBf16, false, mix);
      check_fp8_ffn(p, DType::kFp32, true, mix);
    }
}

}  // namespace
}  // namespace moe::test
