// The CUDA expert FFN (kernels/cuda/expert_ffn.h) against its CPU twin (kernels/cpu/expert_ffn.h)
// under every expert GEMM method, on seeded random data with empty experts and ragged rows: the
// forward (h, a, ye), the data gradients (da where stored, dh, dxe) and the weight gradients in
// both dtypes.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/expert_ffn.h"
#include "kernels/cuda/expert_ffn.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "tests/cuda/gemm_test_util.h"

namespace moe::test {
namespace {

using cuda::GemmMethod;
using PerGemm = std::array<GemmMethod, kNumExpertGemms>;

PerGemm all_by(GemmMethod m) {
  PerGemm p;
  p.fill(m);
  return p;
}

std::string names_of(const PerGemm& methods) {
  std::string s = cuda::gemm_method_name(methods[0]);
  if (methods == all_by(methods[0])) return s;
  for (int g = 1; g < kNumExpertGemms; ++g)
    s += std::string("/") + cuda::gemm_method_name(methods[g]);
  return s;
}

// methods: each expert GEMM's (ExpertGemm order); fuse: gemm.sm90_fuse_swiglu (SwiGLU in the
// grouped sm90 kernel's epilogues); pingpong: gemm.sm90_schedule. clock: the runner's GEMM clock
// on, which must then time each of the six GEMMs.
void check_expert_ffn(const PerGemm& methods, bool fuse, bool pingpong,
                      const std::vector<int64_t>& rows, int64_t H, int64_t F, DType grad_dtype,
                      uint64_t seed, bool clock = false) {
  const DType dt = DType::kBf16;
  const std::string what = names_of(methods) + (fuse ? " fused" : "") +
                           (pingpong ? " pingpong" : "") + " H=" + std::to_string(H) +
                           " F=" + std::to_string(F) + " grad=" + dtype_name(grad_dtype);
  SCOPED_TRACE(what);
  const int64_t El = int64_t(rows.size());
  std::vector<int64_t> off(El + 1, 0);
  for (int64_t l = 0; l < El; ++l) off[l + 1] = off[l] + rows[l];
  const int64_t R = off[El];
  const std::vector<float> xe = random_values(R * H, dt, seed);
  const std::vector<float> w_in = random_values(El * H * 2 * F, dt, seed + 1);
  const std::vector<float> w_out = random_values(El * F * H, dt, seed + 2);
  const std::vector<float> dye = random_values(R * H, dt, seed + 3);

  std::vector<float> h(R * 2 * F), a(R * F), ye(R * H), da(R * F), dh(R * 2 * F), dxe(R * H);
  std::vector<float> dw_in(El * H * 2 * F), dw_out(El * F * H);
  cpu::expert_ffn_fwd(xe.data(), w_in.data(), w_out.data(), off.data(), El, H, F, dt, h.data(),
                      a.data(), ye.data());
  cpu::expert_ffn_bwd(dye.data(), xe.data(), h.data(), a.data(), w_in.data(), w_out.data(),
                      off.data(), El, H, F, dt, grad_dtype, da.data(), dh.data(), dxe.data(),
                      dw_in.data(), dw_out.data());

  StorageBuf d_xe(dt, xe), d_w_in(dt, w_in), d_w_out(dt, w_out), d_dye(dt, dye);
  StorageBuf d_h(dt, R * 2 * F), d_a(dt, R * F), d_ye(dt, R * H), d_da(dt, R * F);
  StorageBuf d_dh(dt, R * 2 * F), d_dxe(dt, R * H);
  StorageBuf d_dw_in(grad_dtype, El * H * 2 * F), d_dw_out(grad_dtype, El * F * H);
  DevBuf<int64_t> d_off(off);
  cuda::GemmRunner runner;
  for (int g = 0; g < kNumExpertGemms; ++g) runner.set_method(ExpertGemm(g), methods[g]);
  runner.set_sm90_fuse_swiglu(fuse);
  runner.set_sm90_schedule({1, pingpong});
  runner.clock().set_on(clock);
  cuda::ExpertGemmLists lists;
  const ExpertOffsets er{d_off.ptr, off.data(), off[El]};
  cuda::expert_ffn_fwd(d_xe.ptr, d_w_in.ptr, d_w_out.ptr, er, El, H, F, dt, d_h.ptr, d_a.ptr,
                       d_ye.ptr, runner, lists, nullptr);
  cuda::expert_ffn_bwd_data(d_dye.ptr, d_h.ptr, d_w_in.ptr, d_w_out.ptr, er, El, H, F, dt, d_da.ptr,
                            d_dh.ptr, d_dxe.ptr, runner, lists, nullptr);
  cuda::expert_ffn_bwd_weights(d_dye.ptr, d_xe.ptr, d_a.ptr, d_dh.ptr, er, El, H, F, dt, grad_dtype,
                               d_dw_in.ptr, d_dw_out.ptr, false, runner, lists, nullptr);
  const ExpertGemmMs ms = runner.clock().take();
  for (int g = 0; g < kNumExpertGemms; ++g) {
    if (clock)
      EXPECT_GT(ms[g], 0.0) << what << " " << kExpertGemmNames[g];
    else
      EXPECT_TRUE(std::isnan(ms[g])) << what << " " << kExpertGemmNames[g];
  }
  expect_close(d_h.host(), h, dt, what + " h");
  expect_close(d_a.host(), a, dt, what + " a");
  expect_close(d_ye.host(), ye, dt, what + " ye");
  // Fused, the grouped sm90 kernel runs SwiGLU's backward in da's epilogue and never stores da.
  if (!(fuse && methods[int(ExpertGemm::kDgradA)] == GemmMethod::kGroupedSm90))
    expect_close(d_da.host(), da, dt, what + " da");
  expect_close(d_dh.host(), dh, dt, what + " dh");
  expect_close(d_dxe.host(), dxe, dt, what + " dxe");
  // The weight gradients sum over rows whose inputs (a, dh) may differ by an ulp from the CPU's:
  // held to the bf16 bound whatever their dtype.
  expect_close(d_dw_in.host(), dw_in, DType::kBf16, what + " dw_in");
  expect_close(d_dw_out.host(), dw_out, DType::kBf16, what + " dw_out");
}

TEST(ExpertFfnCuda, EveryMethodMatchesCpu) {
  MOE_REQUIRE_GPU();
  std::vector<GemmMethod> methods = {GemmMethod::kLtMultiStream, GemmMethod::kGroupedBatched};
  if (cuda::GroupedGemm::runs_on_current_device()) methods.push_back(GemmMethod::kGroupedSm90);
  uint64_t seed = 42;
  for (GemmMethod m : methods)
    for (bool fuse : {false, true})
      for (bool pingpong : {false, true}) {
        // Only that kernel fuses and has schedules.
        if ((fuse || pingpong) && m != GemmMethod::kGroupedSm90) continue;
        for (DType grad : {DType::kFp32, DType::kBf16}) {
          check_expert_ffn(all_by(m), fuse, pingpong, {0, 130, 1, 0, 257, 64}, 256, 192, grad,
                           seed += 10);
          check_expert_ffn(all_by(m), fuse, pingpong, {40}, 128, 64, grad, seed += 10);
          // F a multiple of 128: fused, SwiGLU runs in the up projection's epilogue too.
          check_expert_ffn(all_by(m), fuse, pingpong, {0, 200, 3, 129}, 192, 256, grad, seed += 10);
        }
      }
}

// gemm.method auto's per-GEMM choice: each GEMM by its own method in one FFN (the fused
// epilogues where up and dgrad_a run on the grouped sm90 kernel, the unfused SwiGLU kernels
// where they do not), with the GEMM clock on timing each of the six.
TEST(ExpertFfnCuda, EachGemmByItsOwnMethodMatchesCpu) {
  MOE_REQUIRE_GPU();
  const GemmMethod lt = GemmMethod::kLtMultiStream, gb = GemmMethod::kGroupedBatched;
  const GemmMethod own =
      cuda::GroupedGemm::runs_on_current_device() ? GemmMethod::kGroupedSm90 : gb;
  uint64_t seed = 900;
  for (const PerGemm& mix : {PerGemm{own, lt, own, lt, own, lt}, PerGemm{lt, own, gb, own, lt, own},
                             PerGemm{gb, gb, lt, lt, own, own}})
    for (DType grad : {DType::kFp32, DType::kBf16}) {
      check_expert_ffn(mix, true, false, {0, 130, 1, 0, 257, 64}, 256, 192, grad, seed += 10, true);
      check_expert_ffn(mix, true, false, {0, 200, 3, 129}, 192, 256, grad, seed += 10, true);
    }
}

// A scope selects its GEMM's method for the calls inside and restores the one before.
TEST(ExpertFfnCuda, ExpertGemmScopeSelectsAndRestores) {
  MOE_REQUIRE_GPU();
  cuda::GemmRunner runner(1);
  runner.set_method(GemmMethod::kLtMultiStream);
  runner.set_method(ExpertGemm::kWgradIn, GemmMethod::kGroupedBatched);
  {
    cuda::ExpertGemmScope scope(runner, ExpertGemm::kWgradIn, nullptr);
    EXPECT_EQ(runner.method(), GemmMethod::kGroupedBatched);
    {
      cuda::ExpertGemmScope inner(runner, ExpertGemm::kUp, nullptr);
      EXPECT_EQ(runner.method(), GemmMethod::kLtMultiStream);
    }
    EXPECT_EQ(runner.method(), GemmMethod::kGroupedBatched);
  }
  EXPECT_EQ(runner.method(), GemmMethod::kLtMultiStream);
  EXPECT_EQ(runner.method(ExpertGemm::kWgradIn), GemmMethod::kGroupedBatched);
}

// Weight gradients over rows in two calls, the first overwriting, the second adding (fp32
// accumulation, which no step issues since the pipeline gathers its chunks' rows), under every
// method (the grouped sm90 kernel only stores: its accumulating GEMMs run on the per-expert list).
// Expert 0 has rows in the second chunk only (zeroed, then added to), expert 2 in the first only
// (left as it is by the second).
TEST(ExpertFfnCuda, WeightGradientsAccumulateOverChunks) {
  MOE_REQUIRE_GPU();
  std::vector<GemmMethod> methods = {GemmMethod::kLtMultiStream, GemmMethod::kGroupedBatched};
  if (cuda::GroupedGemm::runs_on_current_device()) methods.push_back(GemmMethod::kGroupedSm90);
  const DType dt = DType::kBf16, grad = DType::kFp32;
  const int64_t H = 128, F = 64, El = 3;
  const std::vector<std::vector<int64_t>> chunk_rows = {{0, 70, 33}, {41, 128, 0}};
  std::vector<float> dw_in(El * H * 2 * F), dw_out(El * F * H);
  StorageBuf d_dw_in(grad, El * H * 2 * F), d_dw_out(grad, El * F * H);
  for (GemmMethod m : methods) {
    SCOPED_TRACE(cuda::gemm_method_name(m));
    cuda::GemmRunner runner;
    runner.set_method(m);
    cuda::ExpertGemmLists lists;
    uint64_t seed = 700;
    for (size_t c = 0; c < chunk_rows.size(); ++c) {
      std::vector<int64_t> off(El + 1, 0);
      for (int64_t l = 0; l < El; ++l) off[l + 1] = off[l] + chunk_rows[c][l];
      const int64_t R = off[El];
      const std::vector<float> dye = random_values(R * H, dt, seed += 10);
      const std::vector<float> xe = random_values(R * H, dt, seed += 10);
      const std::vector<float> a = random_values(R * F, dt, seed += 10);
      const std::vector<float> dh = random_values(R * 2 * F, dt, seed += 10);
      cpu::expert_ffn_bwd_weights(dye.data(), xe.data(), a.data(), dh.data(), off.data(), El, H, F,
                                  grad, dw_in.data(), dw_out.data(), c > 0);
      StorageBuf d_dye(dt, dye), d_xe(dt, xe), d_a(dt, a), d_dh(dt, dh);
      DevBuf<int64_t> d_off(off);
      const ExpertOffsets er{d_off.ptr, off.data(), off[El]};
      cuda::expert_ffn_bwd_weights(d_dye.ptr, d_xe.ptr, d_a.ptr, d_dh.ptr, er, El, H, F, dt, grad,
                                   d_dw_in.ptr, d_dw_out.ptr, c > 0, runner, lists, nullptr);
    }
    expect_close(d_dw_in.host(), dw_in, DType::kBf16, "dw_in over two chunks");
    expect_close(d_dw_out.host(), dw_out, DType::kBf16, "dw_out over two chunks");
  }
}

}  // namespace
}  // namespace moe::test
