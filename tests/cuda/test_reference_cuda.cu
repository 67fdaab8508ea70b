// The GPU reference math (kernels/cuda/reference.h) against its CPU twin, the float64 loops of
// core/reference.cpp: the seeded weights bit for bit, the SGEMM in every transpose, and whole
// reference steps (routing variants, capacity drops, shared experts, own tokens and local experts a
// strict subset) within fp32 rounding.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp8.h"
#include "core/init.h"
#include "core/reference.h"
#include "core/workload.h"
#include "kernels/cuda/reference.h"
#include "tests/common/router_config.h"
#include "tests/cuda/cuda_test_util.h"

namespace moe::test {
namespace {

double rel_l2_d(const std::vector<double>& got, const std::vector<double>& want) {
  double d = 0, r = 0;
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    d += (got[i] - want[i]) * (got[i] - want[i]);
    r += want[i] * want[i];
  }
  return r > 0 ? std::sqrt(d / r) : std::sqrt(d);
}

Workload small_workload(DType dtype, int64_t H, int64_t F, int64_t E, int64_t K) {
  Workload w;
  w.model.hidden = H;
  w.model.ffn = F;
  w.model.experts = E;
  w.model.topk = K;
  w.tokens_per_rank = 8;
  w.dtype = dtype;
  w.seed = 77;
  return w;
}

TEST(ReferenceCuda, GeneratedWeightsMatchHostInitBitwise) {
  MOE_REQUIRE_GPU();
  for (DType dt : {DType::kBf16, DType::kFp32}) {
    const Workload w = small_workload(dt, 96, 40, 6, 2);
    const int64_t begin = 3 * 96 * 80 + 17, n = 96 * 80 + 5;  // crosses an expert boundary
    std::vector<float> host(n), gate(96 * 6), out_host(n);
    init_w_in_range(w, begin, begin + n, host.data());
    init_w_gate(w, gate.data());
    init_w_out_range(w, begin, begin + n, out_host.data());
    DevBuf<float> d(n), dg(96 * 6), dout(n);
    cuda::generate_weights(w_in_rule(w), begin, n, d.ptr, nullptr);
    cuda::generate_weights(w_gate_rule(w), 0, 96 * 6, dg.ptr, nullptr);
    cuda::generate_weights(w_out_rule(w), begin, n, dout.ptr, nullptr);
    EXPECT_EQ(d.host(), host) << dtype_name(dt);
    EXPECT_EQ(dg.host(), gate) << dtype_name(dt);
    EXPECT_EQ(dout.host(), out_host) << dtype_name(dt);
  }
}

TEST(ReferenceCuda, SgemmEveryTransposeMatchesFloat64) {
  MOE_REQUIRE_GPU();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t M = 70, N = 133, K = 45;  // not multiples of the tiles
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int acc = 0; acc < 2; ++acc) {
        std::vector<float> A(M * K), B(K * N), C(M * N);
        for (float& v : A) v = u(rng);
        for (float& v : B) v = u(rng);
        for (float& v : C) v = u(rng);
        const int64_t lda = ta ? M : K, ldb = tb ? K : N;
        std::vector<float> want(M * N);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            double s = acc ? C[m * N + n] : 0.0;
            for (int64_t k = 0; k < K; ++k)
              s += double(ta ? A[k * lda + m] : A[m * lda + k]) *
                   double(tb ? B[n * ldb + k] : B[k * ldb + n]);
            want[m * N + n] = float(s);
          }
        DevBuf<float> dA(A), dB(B), dC(C);
        cuda::reference_sgemm(ta, tb, M, N, K, dA.ptr, lda, dB.ptr, ldb, acc, dC.ptr, N, nullptr);
        EXPECT_LT(rel_l2(dC.host(), want), 1e-6)
            << "trans_a " << ta << " trans_b " << tb << " accumulate " << acc;
      }
}

// The FP8 checks' weights quantized on the device, bit for bit as the host's
// fp8_quantize_weight: values over many octaves (subnormal codes and zeros among them), partial
// 128 x 128 blocks, a zero block, both recipes.
TEST(ReferenceCuda, QuantizeWeightMatchesHostBitwise) {
  MOE_REQUIRE_GPU();
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> octave(-30, 8);
  const int64_t rows = 300, cols = 200;
  std::vector<float> W(rows * cols);
  for (float& v : W) v = std::ldexp(mant(rng), octave(rng));
  for (int64_t r = 128; r < 256; ++r)
    for (int64_t c = 0; c < 128; ++c) W[r * cols + c] = 0.0f;  // block (1, 0): zero
  DevBuf<uint32_t> amax(1);
  for (Fp8Recipe recipe : {Fp8Recipe::kBlock, Fp8Recipe::kTensor}) {
    std::vector<float> want = W;
    fp8_quantize_weight(want.data(), rows, cols, recipe);
    DevBuf<float> d(W);
    cuda::reference_quantize_weight(d.ptr, rows, cols, recipe, amax.ptr, nullptr);
    const std::vector<float> got = d.host();
    int64_t differ = 0;
    for (int64_t i = 0; i < rows * cols; ++i) differ += std::memcmp(&got[i], &want[i], 4) != 0;
    EXPECT_EQ(differ, 0) << (recipe == Fp8Recipe::kBlock ? "fp8_block" : "fp8_tensor");
  }
}

struct StepCase {
  const char* name;
  RouterConfig router;
  int64_t E, K, capacity;
  bool by_position;
  int64_t shared_experts = 0, shared_ffn = 0;
};

TEST(ReferenceCuda, WholeStepMatchesCpuMath) {
  MOE_REQUIRE_GPU();
  RouterConfig sigmoid_groups = make_cfg("sigmoid", false, true, 2.5, 4, 2, 0.01, 0.001);
  sigmoid_groups.expert_bias = true;
  const std::vector<StepCase> cases = {
      {"softmax", make_cfg("softmax", false, false, 1.0, 1, 1, 0.01, 0.001), 8, 2, 0, false},
      {"sigmoid_groups_capacity", sigmoid_groups, 16, 4, 5, false},
      {"softmax_capacity_position", make_cfg("softmax", false, true, 1.0, 1, 1, 0.01, 0.001), 8, 3,
       4, true},
      {"sigmoid_groups_2_shared", sigmoid_groups, 16, 4, 0, false, 2, 24},
      {"softmax_1_shared_wider", make_cfg("softmax", false, true, 1.0, 1, 1, 0.0, 0.0), 8, 2, 0,
       false, 1, 56},
  };
  const int64_t N = 48, H = 72, F = 40;
  for (const StepCase& c : cases) {
    SCOPED_TRACE(c.name);
    Workload w = small_workload(DType::kBf16, H, F, c.E, c.K);
    w.router = c.router;
    w.model.shared_experts = c.shared_experts;
    w.model.shared_ffn = c.shared_ffn;
    ReferenceProblem prob;
    prob.tokens = N;
    prob.model = w.model;
    prob.router = w.router;
    prob.capacity = c.capacity;
    prob.capacity_group = 16;
    prob.drop_by_position = c.by_position;
    std::mt19937 rng(11);
    std::normal_distribution<float> g(0.0f, 1.0f);
    prob.x.resize(N * H);
    prob.dout.resize(N * H);
    for (double& v : prob.x) v = g(rng);  // float values, as the backends' tokens are
    for (double& v : prob.dout) v = g(rng);
    if (w.router.expert_bias) {
      std::vector<float> b(c.E);
      init_expert_bias(w, b.data());
      prob.expert_bias.assign(b.begin(), b.end());
    }
    ReferenceProblem gpu_prob = prob;
    auto cpu = cpu_reference_math_from_seed(w, prob);
    auto gpu = cuda::gpu_reference_math(w, gpu_prob);
    EXPECT_TRUE(gpu_prob.w_in.empty()) << "the GPU math must not need host weights";
    // Own tokens and local experts a strict subset, as on one rank of four.
    const int64_t tb = 16, te = 32, eb = c.E / 4, ee = c.E / 2;
    const ReferenceResult a = reference_step(prob, *cpu, nullptr, nullptr, tb, te, eb, ee);
    const ReferenceResult b = reference_step(gpu_prob, *gpu, nullptr, nullptr, tb, te, eb, ee);
    EXPECT_EQ(b.math, "gpu fp32");
    EXPECT_EQ(a.idx, b.idx);
    EXPECT_EQ(a.dropped, b.dropped);
    int64_t drops = 0;
    for (uint8_t d : a.dropped) drops += d;
    if (c.capacity > 0) EXPECT_GT(drops, 0) << "the case should exercise capacity drops";
    EXPECT_LT(rel_l2_d(b.out, a.out), 1e-5);
    EXPECT_LT(rel_l2_d(b.dx, a.dx), 1e-5);
    EXPECT_LT(rel_l2_d(b.dw_gate, a.dw_gate), 1e-5);
    EXPECT_LT(rel_l2_d(b.dw_in, a.dw_in), 1e-5);
    EXPECT_LT(rel_l2_d(b.dw_out, a.dw_out), 1e-5);
    EXPECT_EQ(int64_t(a.dw_sh_in.size()), c.shared_experts * H * 2 * c.shared_ffn);
    EXPECT_LT(rel_l2_d(b.dw_sh_in, a.dw_sh_in), 1e-5);
    EXPECT_LT(rel_l2_d(b.dw_sh_out, a.dw_sh_out), 1e-5);
    EXPECT_LT(rel_l2_d(b.p, a.p), 1e-5);
    EXPECT_NEAR(b.aux, a.aux, 1e-5 * std::fabs(a.aux) + 1e-9);
    EXPECT_NEAR(b.z, a.z, 1e-5 * std::fabs(a.z) + 1e-9);
    double norm = 0;
    for (double v : a.dw_in) norm += v * v;
    EXPECT_GT(norm, 0) << "local experts should have received rows";
  }
}

// FP8: the GPU math quantizes as the CPU math does (the activations on the host, the weights on
// the device), around its fp32 GEMMs. Both
// recipes, operands of two EP groups' rows (and a pipelined step's wider weight-gradient
// operands), a shared expert, FP8 dispatch; 128-blocks cut ragged (H 160, F 96). They differ by
// fp32 against float64 products only, and where that moves a bf16 rounding, by an e4m3 step of
// that value: far below the check's 1e-2.
TEST(ReferenceCuda, Fp8StepMatchesCpuMath) {
  MOE_REQUIRE_GPU();
  struct Fp8Case {
    const char* name;
    Precision precision;
    bool dispatch_fp8, pipelined;
    int64_t shared_experts;
  };
  const std::vector<Fp8Case> cases = {
      {"tensor", Precision::kFp8Tensor, false, false, 0},
      {"block", Precision::kFp8Block, false, false, 0},
      {"block_shared_pipelined", Precision::kFp8Block, false, true, 1},
      {"block_dispatch_fp8", Precision::kFp8Block, true, false, 0},
      {"tensor_shared", Precision::kFp8Tensor, false, false, 2},
  };
  const int64_t N = 64, H = 160, F = 96, E = 8, K = 2;
  for (const Fp8Case& c : cases) {
    SCOPED_TRACE(c.name);
    Workload w = small_workload(DType::kBf16, H, F, E, K);
    w.router = make_cfg("softmax", false, true, 1.0, 1, 1, 0.01, 0.001);
    w.model.shared_experts = c.shared_experts;
    w.model.shared_ffn = 48;
    ReferenceProblem prob;
    prob.tokens = N;
    prob.model = w.model;
    prob.router = w.router;
    prob.precision = c.precision;
    prob.dispatch_fp8 = c.dispatch_fp8;
    // Four ranks of 16 tokens in two EP groups; pipelined: two chunks a rank, the weight
    // gradients over both.
    prob.gemm_operand.resize(N);
    prob.shared_operand.resize(N);
    for (int64_t t = 0; t < N; ++t) {
      prob.gemm_operand[t] = int32_t(c.pipelined ? (t / 32) * 2 + (t % 16) / 8 : t / 32);
      prob.shared_operand[t] = int32_t(t / 16);
    }
    if (c.pipelined) {
      prob.wgrad_operand.resize(N);
      for (int64_t t = 0; t < N; ++t) prob.wgrad_operand[t] = int32_t(t / 32);
    }
    std::mt19937 rng(21);
    std::normal_distribution<float> g(0.0f, 1.0f);
    prob.x.resize(N * H);
    prob.dout.resize(N * H);
    for (double& v : prob.x) v = double(__bfloat162float(__float2bfloat16_rn(g(rng))));
    for (double& v : prob.dout) v = double(__bfloat162float(__float2bfloat16_rn(g(rng))));
    ReferenceProblem gpu_prob = prob;
    auto cpu = cpu_reference_math_from_seed(w, prob);
    auto gpu = cuda::gpu_reference_math(w, gpu_prob);
    const int64_t tb = 16, te = 32, eb = 2, ee = 6;
    const ReferenceResult a = reference_step(prob, *cpu, nullptr, nullptr, tb, te, eb, ee);
    const ReferenceResult b = reference_step(gpu_prob, *gpu, nullptr, nullptr, tb, te, eb, ee);
    EXPECT_EQ(a.idx, b.idx);
    const double out = rel_l2_d(b.out, a.out), dx = rel_l2_d(b.dx, a.dx);
    const double dw_in = rel_l2_d(b.dw_in, a.dw_in), dw_out = rel_l2_d(b.dw_out, a.dw_out);
    std::printf("  %-24s out %.2e dx %.2e dw_in %.2e dw_out %.2e", c.name, out, dx, dw_in, dw_out);
    EXPECT_LT(out, 2e-3);
    EXPECT_LT(dx, 2e-3);
    EXPECT_LT(dw_in, 2e-3);
    EXPECT_LT(dw_out, 2e-3);
    EXPECT_LT(rel_l2_d(b.dw_gate, a.dw_gate), 2e-3);
    if (c.shared_experts > 0) {
      const double sh_in = rel_l2_d(b.dw_sh_in, a.dw_sh_in);
      std::printf(" dw_sh_in %.2e", sh_in);
      EXPECT_LT(sh_in, 2e-3);
      EXPECT_LT(rel_l2_d(b.dw_sh_out, a.dw_sh_out), 2e-3);
    }
    std::printf("\n");
    // Not the unquantized step: the quantization happened.
    ReferenceProblem plain = gpu_prob;
    plain.precision = Precision::kBf16;
    plain.dispatch_fp8 = false;
    auto bf16 = cuda::gpu_reference_math(w, plain);
    const ReferenceResult u = reference_step(plain, *bf16, nullptr, nullptr, tb, te, eb, ee);
    EXPECT_GT(rel_l2_d(b.out, u.out), 1e-2) << "the GPU math did not quantize";
  }
}

// The check's way: each local expert's gradients handed to a sink as it is finished, in expert
// order, bit for bit those the GPU math writes whole, zeros for experts no row reaches (3 tokens
// of top-2 reach at most 6 of 16).
TEST(ReferenceCuda, ExpertGradSinkGivesTheWholeGradients) {
  MOE_REQUIRE_GPU();
  const int64_t N = 3, H = 72, F = 40, E = 16, K = 2;
  Workload w = small_workload(DType::kBf16, H, F, E, K);
  w.router = make_cfg("softmax", false, false, 1.0, 1, 1, 0.01, 0.001);
  ReferenceProblem prob;
  prob.tokens = N;
  prob.model = w.model;
  prob.router = w.router;
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  prob.x.resize(N * H);
  prob.dout.resize(N * H);
  for (double& v : prob.x) v = g(rng);
  for (double& v : prob.dout) v = g(rng);
  auto gpu = cuda::gpu_reference_math(w, prob);
  const ReferenceResult whole = reference_step(prob, *gpu, nullptr, nullptr, 0, N, 0, E);
  std::vector<int64_t> seen;
  std::vector<double> dw_in, dw_out;
  int64_t empty = 0;
  auto sink = [&](int64_t e, const double* in, const double* out) {
    seen.push_back(e);
    dw_in.insert(dw_in.end(), in, in + H * 2 * F);
    dw_out.insert(dw_out.end(), out, out + F * H);
    bool zero = true;
    for (int64_t i = 0; i < H * 2 * F; ++i) zero = zero && in[i] == 0.0;
    empty += zero;
  };
  const ReferenceResult sunk = reference_step(prob, *gpu, nullptr, nullptr, 0, N, 0, E, sink);
  std::vector<int64_t> expected(E);
  for (int64_t e = 0; e < E; ++e) expected[e] = e;
  EXPECT_EQ(seen, expected);
  EXPECT_GE(empty, E - N * K);
  EXPECT_EQ(dw_in, whole.dw_in);
  EXPECT_EQ(dw_out, whole.dw_out);
  EXPECT_TRUE(sunk.dw_in.empty());
  EXPECT_EQ(sunk.out, whole.out);
  EXPECT_EQ(sunk.dx, whole.dx);
}

}  // namespace
}  // namespace moe::test
