// The GPU reference math: plain fp32 kernels. Speed matters only so far as a large workload is
// checked in seconds rather than hours; every kernel is kept simple enough to read at a glance.
#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cuda/reference.h"

namespace moe::cuda {
namespace {

constexpr int kThreads = 256;

int grid_for(int64_t n) {
  return int(std::max<int64_t>(1, std::min<int64_t>((n + 255) / 256, 1 << 16)));
}

// ---- SGEMM: 64x64 tiles of C per block, 16 deep; 256 threads, each a 4x4 patch. ----
constexpr int kTile = 64, kDepth = 16;

template <bool kTransA, bool kTransB>
__global__ void sgemm_kernel(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                             const float* B, int64_t ldb, bool accumulate, float* C, int64_t ldc) {
  __shared__ float As[kDepth][kTile];  // As[k][m]
  __shared__ float Bs[kDepth][kTile];  // Bs[k][n]
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t m0 = int64_t(blockIdx.y) * kTile, n0 = int64_t(blockIdx.x) * kTile;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kDepth) {
    // Each thread loads 4 elements of each tile; consecutive threads read consecutive addresses.
    for (int j = 0; j < 4; ++j) {
      const int i = tid + j * kThreads;
      const int am = kTransA ? i % kTile : i / kDepth, ak = kTransA ? i / kTile : i % kDepth;
      const int64_t gm = m0 + am, gk = k0 + ak;
      As[ak][am] = gm < M && gk < K ? (kTransA ? A[gk * lda + gm] : A[gm * lda + gk]) : 0.0f;
      const int bn = kTransB ? i / kDepth : i % kTile, bk = kTransB ? i % kDepth : i / kTile;
      const int64_t gn = n0 + bn, gk2 = k0 + bk;
      Bs[bk][bn] = gn < N && gk2 < K ? (kTransB ? B[gn * ldb + gk2] : B[gk2 * ldb + gn]) : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < kDepth; ++k) {
      float a[4], b[4];
      for (int r = 0; r < 4; ++r) a[r] = As[k][ty * 4 + r];
      for (int c = 0; c < 4; ++c) b[c] = Bs[k][tx * 4 + c];
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
    }
    __syncthreads();
  }
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) {
      const int64_t gm = m0 + ty * 4 + r, gn = n0 + tx * 4 + c;
      if (gm >= M || gn >= N) continue;
      float& dst = C[gm * ldc + gn];
      dst = accumulate ? dst + acc[r][c] : acc[r][c];
    }
}

__global__ void generate_kernel(InitRule rule, int64_t begin, int64_t n, float* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = rule.value(uint64_t(begin + i));
}

// ---- FP8 weights (core/fp8.cpp's fp8_quantize_weight, the twin) ----

// e4m3_round on the device: the nearest E4M3 value, ties to even, saturating at kE4m3Max.
__device__ float e4m3_round_ref(float v) {
  const float a = fabsf(v);
  if (!(a < kE4m3Max)) return copysignf(kE4m3Max, v);
  float q;
  if (a < 0x1p-6f) {
    q = rintf(a * 0x1p9f) * 0x1p-9f;  // subnormals: multiples of 2^-9
  } else {
    // 3 of the float's 23 mantissa bits, rounded to nearest even on the bits.
    const uint32_t b = __float_as_uint(a);
    q = __uint_as_float((b + 0x7ffffu + ((b >> 20) & 1u)) & ~0xfffffu);
  }
  return copysignf(fminf(q, kE4m3Max), v);
}

__device__ float fp8_scale_ref(float amax) { return amax > 0.0f ? amax / kE4m3Max : 1.0f; }

// The largest |v| of the block's threads' values into part[0] (max is exact in any order).
__device__ float block_max(float v, float* part) {
  part[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + w]);
    __syncthreads();
  }
  const float m = part[0];
  __syncthreads();
  return m;
}

// fp8_block: block (x, y) quantizes W's 128 x 128 block of column block x, row block y with its
// own scale (a last partial block is a block).
__global__ void quantize_blocks_kernel(float* W, int64_t rows, int64_t cols) {
  __shared__ float part[kThreads];
  const int64_t r0 = int64_t(blockIdx.y) * kFp8Block, c0 = int64_t(blockIdx.x) * kFp8Block;
  const int64_t br = min(rows - r0, kFp8Block), bc = min(cols - c0, kFp8Block);
  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < br * bc; i += blockDim.x)
    amax = fmaxf(amax, fabsf(W[(r0 + i / bc) * cols + c0 + i % bc]));
  const float scale = fp8_scale_ref(block_max(amax, part));
  for (int64_t i = threadIdx.x; i < br * bc; i += blockDim.x) {
    float& v = W[(r0 + i / bc) * cols + c0 + i % bc];
    v = scale * e4m3_round_ref(v / scale);
  }
}

// fp8_tensor: the largest |v| of W [n] into amax_bits (zeroed first), as float bits: the bits of
// non-negative floats order as they do.
__global__ void tensor_amax_kernel(const float* W, int64_t n, uint32_t* amax_bits) {
  __shared__ float part[kThreads];
  float amax = 0.0f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    amax = fmaxf(amax, fabsf(W[i]));
  amax = block_max(amax, part);
  if (threadIdx.x == 0) atomicMax(amax_bits, __float_as_uint(amax));
}

__global__ void quantize_tensor_kernel(float* W, int64_t n, const uint32_t* amax_bits) {
  const float scale = fp8_scale_ref(__uint_as_float(*amax_bits));
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    W[i] = scale * e4m3_round_ref(W[i] / scale);
}

// dst [n, H] = src[rows[r]] for each listed row.
__global__ void gather_rows_kernel(const float* src, const int32_t* rows, int64_t n, int64_t H,
                                   float* dst) {
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x)
    for (int64_t h = threadIdx.x; h < H; h += blockDim.x)
      dst[r * H + h] = src[int64_t(rows[r]) * H + h];
}

__device__ float silu(float v) { return v / (1.0f + expf(-v)); }

// a [n, F] = silu(g) * u, h = [g | u] of [n, 2F].
__global__ void swiglu_kernel(const float* h, int64_t n, int64_t F, float* a) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * F;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / F, f = i % F;
    a[i] = silu(h[r * 2 * F + f]) * h[r * 2 * F + F + f];
  }
}

// dh [n, 2F] from da [n, F] and h: dg = da * u * silu'(g), du = da * silu(g).
__global__ void swiglu_grad_kernel(const float* da, const float* h, int64_t n, int64_t F,
                                   float* dh) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * F;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / F, f = i % F;
    const float g = h[r * 2 * F + f], u = h[r * 2 * F + F + f];
    const float sig = 1.0f / (1.0f + expf(-g));
    dh[r * 2 * F + f] = da[i] * u * sig * (1.0f + g * (1.0f - sig));
    dh[r * 2 * F + F + f] = da[i] * g * sig;
  }
}

// For each row r of one expert (block r): own rows (slot >= 0, the (t, k) of an own token) add
// p * y to out[slot / K] and set dp[slot] = <y, dout>; then y becomes dy = p * dout for the
// backward. An expert sees a token at most once, so the adds to out never race.
__global__ void combine_rows_kernel(float* y, const float* d, const float* p, const int32_t* slot,
                                    int64_t n, int64_t H, int64_t K, float* out, float* dp) {
  __shared__ float part[kThreads];
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const int s = slot[r];
    float dot = 0;
    for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
      const float yv = y[r * H + h], dv = d[r * H + h];
      if (s >= 0) out[int64_t(s / K) * H + h] += p[r] * yv;
      dot += yv * dv;
      y[r * H + h] = p[r] * dv;
    }
    part[threadIdx.x] = dot;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w /= 2) {
      if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
      __syncthreads();
    }
    if (threadIdx.x == 0 && s >= 0) dp[s] = part[0];
    __syncthreads();
  }
}

// dx[slot / K] += dxr[r] for own rows.
__global__ void scatter_add_rows_kernel(const float* dxr, const int32_t* slot, int64_t n, int64_t H,
                                        int64_t K, float* dx) {
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const int s = slot[r];
    if (s < 0) continue;
    for (int64_t h = threadIdx.x; h < H; h += blockDim.x)
      dx[int64_t(s / K) * H + h] += dxr[r * H + h];
  }
}

void* device_alloc(int64_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t rc = cudaMalloc(&p, size_t(std::max<int64_t>(bytes, 1)));
  if (rc == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    MOE_USER_CHECK(false, "out of GPU memory for the GPU reference's "
                              << what << " (" << (bytes >> 20)
                              << " MiB): set reference=cpu, lower tokens_per_rank, or set "
                                 "check=off");
  }
  CUDA_CHECK(rc);
  return p;
}

// A grow-only device array (the reference runs between timed steps, so it may allocate).
template <class T>
struct DeviceArray {
  T* ptr = nullptr;
  int64_t count = 0;
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr); }
  void ensure(int64_t n, const char* what) {
    if (n <= count) return;
    cudaFree(ptr);
    ptr = nullptr;
    count = 0;
    ptr = static_cast<T*>(device_alloc(n * int64_t(sizeof(T)), what));
    count = n;
  }
};
using DeviceBuffer = DeviceArray<float>;

class GpuMath : public ReferenceMath {
 public:
  GpuMath(const Workload& w, const ReferenceProblem& prob)
      : prob_(prob),
        N_(prob.tokens),
        H_(w.model.hidden),
        F_(w.model.ffn),
        E_(w.model.experts),
        K_(w.model.topk),
        S_(w.model.shared_experts),
        Fs_(w.model.shared_ffn),
        w_in_rule_(w_in_rule(w)),
        w_out_rule_(w_out_rule(w)),
        w_sh_in_rule_(w_sh_in_rule(w)),
        w_sh_out_rule_(w_sh_out_rule(w)) {
    MOE_CHECK(int64_t(prob.x.size()) == N_ * H_ && int64_t(prob.dout.size()) == N_ * H_,
              "the GPU reference needs the world's x and dout");
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    x_.ensure(N_ * H_, "tokens");
    dout_.ensure(N_ * H_, "tokens");
    upload(prob.x.data(), N_ * H_, x_.ptr);
    upload(prob.dout.data(), N_ * H_, dout_.ptr);
    w_gate_.ensure(H_ * E_, "router weight");
    generate_weights(w_gate_rule(w), 0, H_ * E_, w_gate_.ptr, stream_);
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  ~GpuMath() override { cudaStreamDestroy(stream_); }

  std::string name() const override { return "gpu fp32"; }

  std::vector<double> logits() override {
    DeviceBuffer logits;
    logits.ensure(N_ * E_, "logits");
    reference_sgemm(false, false, N_, E_, H_, x_.ptr, H_, w_gate_.ptr, E_, false, logits.ptr, E_,
                    stream_);
    return download(logits.ptr, N_ * E_);
  }

  void experts(const int32_t* idx, const uint8_t* dropped, const double* p,
               const ExpertsPass& ps) override {
    if (prob_.precision != Precision::kBf16) return fp8_experts(prob_, idx, dropped, p, ps, fp8());
    const int64_t H = H_, F = F_, K = K_, T = ps.token_end - ps.token_begin;
    // Per expert, the rows that matter: those of own tokens, and all of a local expert's.
    std::vector<std::vector<int32_t>> tok(E_), slot(E_);
    std::vector<std::vector<float>> pr(E_);
    for (int64_t t = 0; t < N_; ++t) {
      const bool own = t >= ps.token_begin && t < ps.token_end;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t e = idx[t * K + k];
        const bool local = ps.local(e) >= 0;
        if ((!own && !local) || (ps.local_only && !local) || (dropped && dropped[t * K + k]))
          continue;
        tok[e].push_back(int32_t(t));
        slot[e].push_back(own ? int32_t((t - ps.token_begin) * K + k) : -1);
        pr[e].push_back(float(p[t * K + k]));
      }
    }
    int64_t most = 0;
    for (const auto& v : tok) most = std::max<int64_t>(most, int64_t(v.size()));
    const int64_t chunk = ensure_expert(most, F);
    DeviceBuffer out, dp, dx;
    out.ensure(T * H, "out");
    dp.ensure(T * K, "dp");
    dx.ensure(T * H, "dx");
    CUDA_CHECK(cudaMemsetAsync(out.ptr, 0, T * H * 4, stream_));
    CUDA_CHECK(cudaMemsetAsync(dp.ptr, 0, T * K * 4, stream_));
    CUDA_CHECK(cudaMemsetAsync(dx.ptr, 0, T * H * 4, stream_));

    for (int64_t e = 0; e < E_; ++e) {
      const int64_t rows = int64_t(tok[e].size());
      const bool local = ps.local(e) >= 0 && ps.backward;
      if (rows == 0) {  // a local expert without rows keeps its zero gradients
        if (local && ps.expert_grads) {
          grad_in64_.assign(H * 2 * F, 0.0);
          grad_out64_.assign(F * H, 0.0);
          ps.expert_grads(e, grad_in64_.data(), grad_out64_.data());
        }
        continue;
      }
      generate_weights(w_in_rule_, e * H * 2 * F, H * 2 * F, w_in_.ptr, stream_);
      generate_weights(w_out_rule_, e * F * H, F * H, w_out_.ptr, stream_);
      if (local) {
        CUDA_CHECK(cudaMemsetAsync(dw_in_.ptr, 0, H * 2 * F * 4, stream_));
        CUDA_CHECK(cudaMemsetAsync(dw_out_.ptr, 0, F * H * 4, stream_));
      }
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = std::min(chunk, rows - r0);
        run_chunk(F, K, &tok[e][r0], &slot[e][r0], &pr[e][r0], n, local, ps.backward, out.ptr,
                  dp.ptr, dx.ptr);
      }
      if (local) hand_over_grads(e, ps);
    }
    if (ps.out) add_to(download_f(out.ptr, T * H), ps.out);
    if (ps.dp) {
      const std::vector<float> v = download_f(dp.ptr, T * K);
      for (int64_t i = 0; i < T * K; ++i) ps.dp[i] = v[i];
    }
    if (ps.backward && ps.dx) add_to(download_f(dx.ptr, T * H), ps.dx);
  }

  // FP8: the host quantizes the activations as the CPU math does (core/reference.cpp), around
  // these fp32 GEMMs; each expert's weights are made from the seed and quantized here on the
  // device, where the GEMMs read them (a GEMM's operands are fp32 values exactly: scale times an
  // e4m3 code).
  Fp8Arithmetic fp8() {
    Fp8Arithmetic a;
    a.quantize_weights = [this](bool shared, int64_t e, Fp8Recipe recipe) {
      const int64_t H = H_, F = shared ? Fs_ : F_;
      fp8_w_in_.ensure(H * 2 * F, "FP8 weights");
      fp8_w_out_.ensure(F * H, "FP8 weights");
      amax_.ensure(1, "FP8 weights' amax");
      generate_weights(shared ? w_sh_in_rule_ : w_in_rule_, e * H * 2 * F, H * 2 * F, fp8_w_in_.ptr,
                       stream_);
      generate_weights(shared ? w_sh_out_rule_ : w_out_rule_, e * F * H, F * H, fp8_w_out_.ptr,
                       stream_);
      reference_quantize_weight(fp8_w_in_.ptr, H, 2 * F, recipe, amax_.ptr, stream_);
      reference_quantize_weight(fp8_w_out_.ptr, F, H, recipe, amax_.ptr, stream_);
    };
    a.matmul = [this](const std::vector<double>& A, ExpertWeight w, int64_t n, int64_t K, int64_t N,
                      bool trans) {
      if (n == 0 || N == 0) return std::vector<double>(n * N, 0.0);
      mm_a_.ensure(n * K, "FP8 operands");
      mm_c_.ensure(n * N, "FP8 products");
      upload(A.data(), n * K, mm_a_.ptr);
      const float* W = w == ExpertWeight::kIn ? fp8_w_in_.ptr : fp8_w_out_.ptr;
      reference_sgemm(false, trans, n, N, K, mm_a_.ptr, K, W, trans ? K : N, false, mm_c_.ptr, N,
                      stream_);
      return download(mm_c_.ptr, n * N);
    };
    a.add_t_times = [this](const std::vector<double>& A, const std::vector<double>& B, int64_t n,
                           int64_t M, int64_t N, double* C) {
      if (n == 0 || M == 0 || N == 0) return;
      mm_a_.ensure(n * M, "FP8 operands");
      mm_b_.ensure(n * N, "FP8 operands");
      mm_c_.ensure(M * N, "FP8 products");
      upload(A.data(), n * M, mm_a_.ptr);
      upload(B.data(), n * N, mm_b_.ptr);
      reference_sgemm(true, false, M, N, n, mm_a_.ptr, M, mm_b_.ptr, N, false, mm_c_.ptr, N,
                      stream_);
      download_into(grad_in_, mm_c_.ptr, M * N);
      add_to(grad_in_, C);
    };
    return a;
  }

  // Local expert e's gradients, as computed in dw_in_ and dw_out_, into its slot of the pass's
  // or to its sink. The host copies are members, kept across experts: a fresh vector of 100-350
  // MB (DeepSeek-V3's shapes) per expert cost its page faults every time, more than the copy.
  void hand_over_grads(int64_t e, const ExpertsPass& ps) {
    const int64_t H = H_, F = F_;
    download_into(grad_in_, dw_in_.ptr, H * 2 * F);
    download_into(grad_out_, dw_out_.ptr, F * H);
    if (!ps.expert_grads) {
      const int64_t el = ps.local(e);
      add_to(grad_in_, ps.dw_in + el * H * 2 * F);
      add_to(grad_out_, ps.dw_out + el * F * H);
      return;
    }
    convert_into(grad_in_.data(), int64_t(grad_in_.size()), grad_in64_);
    convert_into(grad_out_.data(), int64_t(grad_out_.size()), grad_out64_);
    ps.expert_grads(e, grad_in64_.data(), grad_out64_.data());
  }

  void router_backward(int64_t token_begin, int64_t token_end, const double* dlogits, double* dx,
                       double* dw_gate) override {
    const int64_t T = token_end - token_begin, H = H_, E = E_;
    if (T == 0) return;
    DeviceBuffer dl, dxr, dwg;
    dl.ensure(T * E, "dlogits");
    dxr.ensure(T * H, "dx");
    dwg.ensure(H * E, "dw_gate");
    upload(dlogits, T * E, dl.ptr);
    // dx [T, H] = dlogits [T, E] @ w_gate^T;  dw_gate [H, E] = x_own^T [H, T] @ dlogits.
    reference_sgemm(false, true, T, H, E, dl.ptr, E, w_gate_.ptr, E, false, dxr.ptr, H, stream_);
    reference_sgemm(true, false, H, E, T, x_.ptr + token_begin * H, H, dl.ptr, E, false, dwg.ptr, E,
                    stream_);
    add_to(download_f(dxr.ptr, T * H), dx);
    add_to(download_f(dwg.ptr, H * E), dw_gate);
  }

  void shared_experts(const ExpertsPass& ps) override {
    const int64_t H = H_, F = Fs_, T = ps.token_end - ps.token_begin;
    if (S_ == 0 || T == 0) return;
    if (prob_.precision != Precision::kBf16) return fp8_shared_experts(prob_, ps, fp8());
    // Every own token is a row of weight 1 of each shared expert: out[slot] += y, as a routed
    // row's with K = 1.
    std::vector<int32_t> tok(T), slot(T);
    const std::vector<float> ones(T, 1.0f);
    for (int64_t r = 0; r < T; ++r) {
      tok[r] = int32_t(ps.token_begin + r);
      slot[r] = int32_t(r);
    }
    const int64_t chunk = ensure_expert(T, F);
    DeviceBuffer out, dp, dx;
    out.ensure(T * H, "out");
    dp.ensure(T, "dp");
    dx.ensure(T * H, "dx");
    CUDA_CHECK(cudaMemsetAsync(out.ptr, 0, T * H * 4, stream_));
    CUDA_CHECK(cudaMemsetAsync(dx.ptr, 0, T * H * 4, stream_));
    for (int64_t s = 0; s < S_; ++s) {
      generate_weights(w_sh_in_rule_, s * H * 2 * F, H * 2 * F, w_in_.ptr, stream_);
      generate_weights(w_sh_out_rule_, s * F * H, F * H, w_out_.ptr, stream_);
      CUDA_CHECK(cudaMemsetAsync(dw_in_.ptr, 0, H * 2 * F * 4, stream_));
      CUDA_CHECK(cudaMemsetAsync(dw_out_.ptr, 0, F * H * 4, stream_));
      for (int64_t r0 = 0; r0 < T; r0 += chunk)
        run_chunk(F, 1, &tok[r0], &slot[r0], &ones[r0], std::min(chunk, T - r0), ps.backward,
                  ps.backward, out.ptr, dp.ptr, dx.ptr);
      if (ps.backward && ps.dw_in)
        add_to(download_f(dw_in_.ptr, H * 2 * F), ps.dw_in + s * H * 2 * F);
      if (ps.backward && ps.dw_out) add_to(download_f(dw_out_.ptr, F * H), ps.dw_out + s * F * H);
    }
    if (ps.out) add_to(download_f(out.ptr, T * H), ps.out);
    if (ps.backward && ps.dx) add_to(download_f(dx.ptr, T * H), ps.dx);
  }

 private:
  // Sizes the buffers of one expert of width F (weights, gradients) and of a chunk of its rows,
  // for up to `rows` rows; returns the chunk's rows, bounded so that its activations stay near
  // 2 GiB.
  int64_t ensure_expert(int64_t rows, int64_t F) {
    const int64_t H = H_, row_bytes = (3 * H + 6 * F) * 4;
    const int64_t chunk =
        std::max<int64_t>(1, std::min<int64_t>(rows, (int64_t(2) << 30) / row_bytes));
    w_in_.ensure(H * 2 * F, "expert weights");
    w_out_.ensure(F * H, "expert weights");
    dw_in_.ensure(H * 2 * F, "expert weight gradients");
    dw_out_.ensure(F * H, "expert weight gradients");
    xr_.ensure(chunk * H, "expert activations");
    dr_.ensure(chunk * H, "expert activations");
    yr_.ensure(chunk * H, "expert activations");
    hr_.ensure(chunk * 2 * F, "expert activations");
    dhr_.ensure(chunk * 2 * F, "expert activations");
    ar_.ensure(chunk * F, "expert activations");
    dar_.ensure(chunk * F, "expert activations");
    rows_tok_.ensure(chunk, "row lists");
    rows_slot_.ensure(chunk, "row lists");
    rows_p_.ensure(chunk, "row lists");
    return chunk;
  }

  // One chunk of n rows of the expert of width F whose weights are in w_in_ / w_out_; an own row
  // adds to the token slot[r] / K of out and dx, and sets dp[slot[r]].
  void run_chunk(int64_t F, int64_t K, const int32_t* tok, const int32_t* slot, const float* p,
                 int64_t n, bool local, bool backward, float* out, float* dp, float* dx) {
    const int64_t H = H_, F2 = 2 * F;
    int32_t* d_tok = rows_tok_.ptr;
    int32_t* d_slot = rows_slot_.ptr;
    CUDA_CHECK(cudaMemcpyAsync(d_tok, tok, n * 4, cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaMemcpyAsync(d_slot, slot, n * 4, cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaMemcpyAsync(rows_p_.ptr, p, n * 4, cudaMemcpyHostToDevice, stream_));
    const int grid = int(std::min<int64_t>(n, 1 << 16));
    gather_rows_kernel<<<grid, kThreads, 0, stream_>>>(x_.ptr, d_tok, n, H, xr_.ptr);
    gather_rows_kernel<<<grid, kThreads, 0, stream_>>>(dout_.ptr, d_tok, n, H, dr_.ptr);
    CUDA_CHECK(cudaGetLastError());
    // h = x @ w_in;  a = swiglu(h);  y = a @ w_out.
    reference_sgemm(false, false, n, F2, H, xr_.ptr, H, w_in_.ptr, F2, false, hr_.ptr, F2, stream_);
    swiglu_kernel<<<grid_for(n * F), kThreads, 0, stream_>>>(hr_.ptr, n, F, ar_.ptr);
    CUDA_CHECK(cudaGetLastError());
    reference_sgemm(false, false, n, H, F, ar_.ptr, F, w_out_.ptr, H, false, yr_.ptr, H, stream_);
    // out += p * y and dp = <y, dout> for own rows; yr_ then holds dy = p * dout.
    combine_rows_kernel<<<grid, kThreads, 0, stream_>>>(yr_.ptr, dr_.ptr, rows_p_.ptr, d_slot, n, H,
                                                        K, out, dp);
    CUDA_CHECK(cudaGetLastError());
    if (!backward) return;
    // da = dy @ w_out^T;  dw_out += a^T dy;  dh = swiglu'(h) da;  dw_in += x^T dh;  dx += dh
    // w_in^T.
    reference_sgemm(false, true, n, F, H, yr_.ptr, H, w_out_.ptr, H, false, dar_.ptr, F, stream_);
    if (local)
      reference_sgemm(true, false, F, H, n, ar_.ptr, F, yr_.ptr, H, true, dw_out_.ptr, H, stream_);
    swiglu_grad_kernel<<<grid_for(n * F), kThreads, 0, stream_>>>(dar_.ptr, hr_.ptr, n, F,
                                                                  dhr_.ptr);
    CUDA_CHECK(cudaGetLastError());
    if (local)
      reference_sgemm(true, false, H, F2, n, xr_.ptr, H, dhr_.ptr, F2, true, dw_in_.ptr, F2,
                      stream_);
    reference_sgemm(false, true, n, H, F2, dhr_.ptr, F2, w_in_.ptr, F2, false, xr_.ptr, H, stream_);
    scatter_add_rows_kernel<<<grid, kThreads, 0, stream_>>>(xr_.ptr, d_slot, n, H, K, dx);
    CUDA_CHECK(cudaGetLastError());
  }

  // The host's passes over these copies run in threads (convert_into, for_each_element): one
  // expert's weights and gradients are hundreds of MB, streamed several times an expert in FP8.
  void upload(const double* v, int64_t n, float* dst) {
    convert_into(v, n, stage_);
    CUDA_CHECK(cudaMemcpyAsync(dst, stage_.data(), n * 4, cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  std::vector<float> download_f(const float* src, int64_t n) {
    std::vector<float> v;
    download_into(v, src, n);
    return v;
  }
  void download_into(std::vector<float>& v, const float* src, int64_t n) {
    v.resize(n);
    CUDA_CHECK(cudaMemcpyAsync(v.data(), src, n * 4, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  std::vector<double> download(const float* src, int64_t n) {
    std::vector<double> out;
    const std::vector<float> v = download_f(src, n);
    convert_into(v.data(), n, out);
    return out;
  }
  static void add_to(const std::vector<float>& v, double* dst) {
    for_each_element(int64_t(v.size()), [&](int64_t i) { dst[i] += v[i]; });
  }

  const ReferenceProblem& prob_;  // outlives the math (compute_reference's)
  int64_t N_, H_, F_, E_, K_, S_, Fs_;
  InitRule w_in_rule_, w_out_rule_, w_sh_in_rule_, w_sh_out_rule_;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer x_, dout_, w_gate_;
  DeviceBuffer w_in_, w_out_, dw_in_, dw_out_;
  DeviceBuffer xr_, dr_, yr_, hr_, dhr_, ar_, dar_;
  DeviceArray<int32_t> rows_tok_, rows_slot_;
  DeviceBuffer rows_p_;
  std::vector<float> grad_in_, grad_out_;  // one expert's gradients on the host (hand_over_grads)
  std::vector<double> grad_in64_, grad_out64_;
  std::vector<float> stage_;           // uploads, kept across calls
  DeviceBuffer mm_a_, mm_b_, mm_c_;    // FP8: one product's operands and result
  DeviceBuffer fp8_w_in_, fp8_w_out_;  // FP8: one expert's quantized weights
  DeviceArray<uint32_t> amax_;         // FP8: a per-tensor amax (reference_quantize_weight)
};

}  // namespace

void generate_weights(const InitRule& rule, int64_t begin, int64_t n, float* dst,
                      cudaStream_t stream) {
  if (n == 0) return;
  generate_kernel<<<grid_for(n), kThreads, 0, stream>>>(rule, begin, n, dst);
  CUDA_CHECK(cudaGetLastError());
}

void reference_quantize_weight(float* W, int64_t rows, int64_t cols, Fp8Recipe recipe,
                               uint32_t* amax_scratch, cudaStream_t stream) {
  if (rows * cols == 0) return;
  if (recipe == Fp8Recipe::kBlock) {
    const dim3 grid(unsigned((cols + kFp8Block - 1) / kFp8Block),
                    unsigned((rows + kFp8Block - 1) / kFp8Block));
    quantize_blocks_kernel<<<grid, kThreads, 0, stream>>>(W, rows, cols);
  } else {
    CUDA_CHECK(cudaMemsetAsync(amax_scratch, 0, 4, stream));
    tensor_amax_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(W, rows * cols,
                                                                       amax_scratch);
    CUDA_CHECK(cudaGetLastError());
    quantize_tensor_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(W, rows * cols,
                                                                           amax_scratch);
  }
  CUDA_CHECK(cudaGetLastError());
}

void reference_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A,
                     int64_t lda, const float* B, int64_t ldb, bool accumulate, float* C,
                     int64_t ldc, cudaStream_t stream) {
  if (M == 0 || N == 0) return;
  MOE_CHECK((N + kTile - 1) / kTile < (int64_t(1) << 31) && (M + kTile - 1) / kTile < 65536,
            "reference GEMM too large: M " << M << " N " << N);
  const dim3 grid(unsigned((N + kTile - 1) / kTile), unsigned((M + kTile - 1) / kTile));
  if (!trans_a && !trans_b)
    sgemm_kernel<false, false>
        <<<grid, kThreads, 0, stream>>>(M, N, K, A, lda, B, ldb, accumulate, C, ldc);
  else if (!trans_a && trans_b)
    sgemm_kernel<false, true>
        <<<grid, kThreads, 0, stream>>>(M, N, K, A, lda, B, ldb, accumulate, C, ldc);
  else if (trans_a && !trans_b)
    sgemm_kernel<true, false>
        <<<grid, kThreads, 0, stream>>>(M, N, K, A, lda, B, ldb, accumulate, C, ldc);
  else
    sgemm_kernel<true, true>
        <<<grid, kThreads, 0, stream>>>(M, N, K, A, lda, B, ldb, accumulate, C, ldc);
  CUDA_CHECK(cudaGetLastError());
}

std::unique_ptr<ReferenceMath> gpu_reference_math(const Workload& w, ReferenceProblem& prob) {
  return std::make_unique<GpuMath>(w, prob);
}

}  // namespace moe::cuda
