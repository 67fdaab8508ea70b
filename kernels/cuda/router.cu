// The CUDA router: the fused per-token kernels of kernels/cpu/router.cpp (score function,
// group-limited top-k, gather, normalize, scaling; the loss statistics; the backward).
//
// One block per token and one thread per expert (blockDim = E rounded up to a warp, E <= 1024), so
// every per-token sum or max is a block reduction; the top-k without group-limited routing over
// up to 256 experts runs a warp per token instead, reducing in the same order. Reductions use one
// fixed shuffle tree per block size and no atomics on floats, so every result is bitwise
// reproducible. Elementwise math follows the CPU twin's order of operations (exp(l - max) / sum, 1
// / (1 + exp(-l)), ...); only the order of the fp32 sums differs, which keeps results within fp32
// rounding of the CPU's.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "core/router_shape.h"
#include "kernels/cuda/router.h"

namespace moe::cuda {
namespace {

constexpr int64_t kMaxExperts = 1024;  // one thread per expert, at most one full block
using Key = unsigned long long;

// ---- ordering: a selection candidate as one 64-bit key, so that "larger q, then lower id" (the
// CPU's strict '>' scan) becomes a plain integer max. High word: the float's bits mapped to an
// unsigned order; low word: ~id, larger for lower ids. Key 0 means "no candidate": every real key
// is larger, because its low word is ~id >= ~1023. ----
__device__ __forceinline__ Key order_key(float v, int id) {
  if (v == 0.0f) v = 0.0f;  // -0 -> +0: the two zeros compare equal on the CPU, so must tie here
  uint32_t b = __float_as_uint(v);
  b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (Key(b) << 32) | Key(~uint32_t(id));
}

__device__ __forceinline__ int key_id(Key k) { return int(~uint32_t(k & 0xffffffffu)); }

struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
  __device__ Key operator()(Key a, Key b) const { return a > b ? a : b; }
};

// Butterfly (xor) reduction: every lane ends with the same value, since each level combines the
// same pairs in every lane and fp32 addition is commutative.
template <class T, class Op>
__device__ __forceinline__ T warp_all(T v, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide reductions whose result every thread gets. Every thread of the block must call each
// one, in the same order. Two shared buffers alternate so that one __syncthreads per call is
// enough: call n + 2 writes its buffer only after every thread passed call n + 1's barrier, that
// is, after every thread finished reading call n's results.
class BlockReducer {
 public:
  __device__ explicit BlockReducer(Key* shared_buf /* [2 * 32] */) : buf_(shared_buf) {}

  __device__ float sum(float v) { return all(v, 0.0f, Sum()); }
  __device__ float max(float v) { return all(v, -INFINITY, Max()); }
  __device__ Key max(Key v) { return all(v, Key(0), Max()); }

 private:
  template <class T, class Op>
  __device__ T all(T v, T identity, Op op) {
    T* slot = reinterpret_cast<T*>(buf_ + 32 * (round_++ & 1));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_all(v, op);
    if (lane == 0) slot[warp] = v;
    __syncthreads();
    v = lane < int(blockDim.x >> 5) ? slot[lane] : identity;
    return warp_all(v, op);
  }

  Key* buf_;
  int round_ = 0;
};

struct TopkArgs {
  int E, K;
  bool softmax, after_topk, normalize;
  float scaling;
  int groups, group_topk, group_size, per_group;  // groups == 1: no group-limited routing
};

// One warp: the best `count` of n values v[i] (order_key order), skipping nothing else; returns
// their sum accumulated in that (descending) order, as the CPU does. If kept != nullptr, sets
// kept[i] = 1 for the winners and 0 for the rest. n <= 1024, so a lane's picks fit 32 bits.
__device__ float warp_top_sum(const float* v, int n, int count, int* kept) {
  const int lane = threadIdx.x & 31;
  if (kept)
    for (int i = lane; i < n; i += 32) kept[i] = 0;
  uint32_t picked = 0;  // bit j: lane + 32 j already taken
  float sum = 0.0f;
  for (int c = 0; c < count; ++c) {
    Key best = 0;
    for (int j = 0, i = lane; i < n; ++j, i += 32)
      if (!((picked >> j) & 1u)) best = Max()(best, order_key(v[i], i));
    best = warp_all(best, Max());
    const int w = key_id(best);
    if (w % 32 == lane) {  // the lane that zeroed kept[w] sets it: no cross-lane hazard
      picked |= 1u << (w / 32);
      if (kept) kept[w] = 1;
    }
    sum += v[w];
  }
  return sum;
}

// ---- A warp per token (no group-limited routing, E <= 32 kWarpChunks): lane l holds experts
// l, l + 32, ... in C chunks, and every reduction combines the chunks as BlockReducer combines the
// warps of a block of 32 C threads (each chunk's butterfly, then chunk j's result in lane j, the
// rest the identity, and a butterfly over those), so the results are the block kernel's, bit for
// bit: no block barriers and eight tokens a block. Chunks past ceil(E / 32) hold only identities,
// as a block's missing warps do. ----
constexpr int kWarpChunks = 8;
constexpr int kWarpTokensPerBlock = 8;

template <int C, class T, class Op>
__device__ __forceinline__ T chunks_all(const T (&v)[C], T identity, Op op, int lane) {
  T mine = identity;
#pragma unroll
  for (int j = 0; j < C; ++j) {
    const T r = warp_all(v[j], op);
    if (lane == j) mine = r;
  }
  return warp_all(mine, op);
}

template <int C>
__global__ void __launch_bounds__(32 * kWarpTokensPerBlock)
    router_topk_warp_kernel(const float* logits, const float* expert_bias,
                            const int32_t* forced_idx, TopkArgs a, int64_t T, float* scores,
                            int32_t* idx, float* p) {
  const int lane = threadIdx.x & 31;
  const int64_t t = int64_t(blockIdx.x) * kWarpTokensPerBlock + (threadIdx.x >> 5);
  if (t >= T) return;  // the whole warp
  bool active[C];
  float l[C], s[C], q[C];
#pragma unroll
  for (int j = 0; j < C; ++j) {
    const int e = 32 * j + lane;
    active[j] = e < a.E;
    l[j] = active[j] ? logits[t * a.E + e] : -INFINITY;
  }
  // Scores, as the block kernel.
  if (a.softmax) {
    const float m = chunks_all(l, -INFINITY, Max(), lane);
    float ex[C];
#pragma unroll
    for (int j = 0; j < C; ++j) ex[j] = active[j] ? expf(l[j] - m) : 0.0f;
    const float sum = chunks_all(ex, 0.0f, Sum(), lane);
#pragma unroll
    for (int j = 0; j < C; ++j) s[j] = ex[j] / sum;
  } else {
#pragma unroll
    for (int j = 0; j < C; ++j) s[j] = 1.0f / (1.0f + expf(-l[j]));
  }
#pragma unroll
  for (int j = 0; j < C; ++j) {
    const int e = 32 * j + lane;
    if (active[j]) scores[t * a.E + e] = s[j];
    q[j] = expert_bias && active[j] ? s[j] + expert_bias[e] : s[j];
  }
  // Top-K: K rounds of a warp argmax over the keys not yet taken (or the forced selection).
  int slot[C];
#pragma unroll
  for (int j = 0; j < C; ++j) slot[j] = -1;
  for (int k = 0; k < a.K; ++k) {
    if (forced_idx) {
      const int f = forced_idx[t * a.K + k];
#pragma unroll
      for (int j = 0; j < C; ++j)
        if (active[j] && f == 32 * j + lane) slot[j] = k;
    } else {
      Key mine[C];
#pragma unroll
      for (int j = 0; j < C; ++j)
        mine[j] = active[j] && slot[j] < 0 ? order_key(q[j], 32 * j + lane) : Key(0);
      const Key best = chunks_all(mine, Key(0), Max(), lane);
#pragma unroll
      for (int j = 0; j < C; ++j)
        if (mine[j] != 0 && mine[j] == best) slot[j] = k;
    }
  }
  // Weights: the gathered score, or the softmax of the selected logits; normalize; scale.
  float w[C];
  if (a.after_topk) {
    float sel[C];
#pragma unroll
    for (int j = 0; j < C; ++j) sel[j] = slot[j] >= 0 ? l[j] : -INFINITY;
    const float m = chunks_all(sel, -INFINITY, Max(), lane);
#pragma unroll
    for (int j = 0; j < C; ++j) w[j] = slot[j] >= 0 ? expf(l[j] - m) : 0.0f;
    const float sum = chunks_all(w, 0.0f, Sum(), lane);
#pragma unroll
    for (int j = 0; j < C; ++j) w[j] = w[j] / sum;
  } else {
#pragma unroll
    for (int j = 0; j < C; ++j) w[j] = s[j];
  }
  if (a.normalize) {
    float sel[C];
#pragma unroll
    for (int j = 0; j < C; ++j) sel[j] = slot[j] >= 0 ? w[j] : 0.0f;
    const float sum = chunks_all(sel, 0.0f, Sum(), lane);
#pragma unroll
    for (int j = 0; j < C; ++j) w[j] = w[j] / (sum + 1e-20f);
  }
#pragma unroll
  for (int j = 0; j < C; ++j) {
    if (slot[j] < 0) continue;
    idx[t * a.K + slot[j]] = 32 * j + lane;
    p[t * a.K + slot[j]] = w[j] * a.scaling;
  }
}

// One token per block, thread e = expert e. Dynamic shared memory (groups > 1 only):
// q [E] fp32, group_score [G] fp32, group_kept [G] int.
__global__ void __launch_bounds__(1024)
    router_topk_kernel(const float* logits, const float* expert_bias, const int32_t* forced_idx,
                       TopkArgs a, float* scores, int32_t* idx, float* p) {
  __shared__ Key reduce_buf[64];
  extern __shared__ float smem[];
  BlockReducer red(reduce_buf);
  const int64_t t = blockIdx.x;
  const int e = threadIdx.x;
  const bool active = e < a.E;
  const float l = active ? logits[t * a.E + e] : -INFINITY;

  // Scores, as the CPU: softmax = exp(l - max) / sum, or sigmoid = 1 / (1 + exp(-l)).
  float s;
  if (a.softmax) {
    const float m = red.max(l);
    const float ex = active ? expf(l - m) : 0.0f;
    const float sum = red.sum(ex);
    s = ex / sum;
  } else {
    s = 1.0f / (1.0f + expf(-l));
  }
  if (active) scores[t * a.E + e] = s;
  const float q = expert_bias && active ? s + expert_bias[e] : s;

  // Group-limited routing: a warp per group sums the group's per_group best q; warp 0 keeps the
  // group_topk best groups (ties: lower group id); only their experts stay selectable.
  bool allowed = active;
  if (a.groups > 1 && !forced_idx) {
    float* q_sh = smem;
    float* group_score = q_sh + a.E;
    int* group_kept = reinterpret_cast<int*>(group_score + a.groups);
    if (active) q_sh[e] = q;
    __syncthreads();
    const int warp = e >> 5, num_warps = blockDim.x >> 5;
    for (int g = warp; g < a.groups; g += num_warps) {
      const float sum = warp_top_sum(q_sh + g * a.group_size, a.group_size, a.per_group, nullptr);
      if ((e & 31) == 0) group_score[g] = sum;
    }
    __syncthreads();
    if (warp == 0) warp_top_sum(group_score, a.groups, a.group_topk, group_kept);
    __syncthreads();
    allowed = active && group_kept[e / a.group_size] != 0;
  }

  // Top-K: K rounds of a block argmax over the keys not yet taken. Keys are unique (they carry
  // the id), so exactly one thread recognises its key as the winner of each round.
  // A forced selection (routing.mode) replaces the rounds; forced_idx is the same for the whole
  // block, so every thread skips the block reductions together.
  int slot = -1;
  if (forced_idx) {
    for (int k = 0; k < a.K; ++k)
      if (active && forced_idx[t * a.K + k] == e) slot = k;
  } else {
    for (int k = 0; k < a.K; ++k) {
      const Key mine = allowed && slot < 0 ? order_key(q, e) : Key(0);
      const Key best = red.max(mine);
      if (mine != 0 && mine == best) slot = k;
    }
  }
  const bool selected = slot >= 0;

  // Weights: the gathered score, or the softmax of the selected logits; normalize; scale.
  float w;
  if (a.after_topk) {
    const float m = red.max(selected ? l : -INFINITY);
    const float ex = selected ? expf(l - m) : 0.0f;
    const float sum = red.sum(ex);
    w = ex / sum;
  } else {
    w = s;
  }
  if (a.normalize) {
    const float sum = red.sum(selected ? w : 0.0f);
    w = w / (sum + 1e-20f);
  }
  w = w * a.scaling;
  if (selected) {
    idx[t * a.K + slot] = e;
    p[t * a.K + slot] = w;
  }
}

// First pass of the loss statistics: block b sums tokens [b * chunk, (b + 1) * chunk) into
// partial[b] = [counts (E), sum_t r (E), sum_t lse^2 (1)] in double, tokens in order.
// Dynamic shared memory: counts [E] int (integer atomics: exact, so order-free).
__global__ void __launch_bounds__(1024)
    router_stats_partial_kernel(const float* logits, const float* scores, const int32_t* idx,
                                bool softmax, int64_t T, int E, int K, double* partial) {
  __shared__ Key reduce_buf[64];
  extern __shared__ int counts[];
  BlockReducer red(reduce_buf);
  const int e = threadIdx.x;
  const bool active = e < E;
  if (active) counts[e] = 0;
  __syncthreads();

  double r_sum = 0.0, lse_sq = 0.0;
  const int64_t t_end = min(T, int64_t(blockIdx.x + 1) * kRouterStatsChunk);
  for (int64_t t = int64_t(blockIdx.x) * kRouterStatsChunk; t < t_end; ++t) {
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
      const int32_t x = idx[t * K + k];
      if (x >= 0 && x < E) atomicAdd(&counts[x], 1);
    }
    // r = s for softmax; s / sum_e s for sigmoid (as the CPU: s * (1 / sum), in fp32).
    const float s = active ? scores[t * E + e] : 0.0f;
    float inv = 1.0f;
    if (!softmax) inv = 1.0f / red.sum(s);
    r_sum += double(s * inv);
    const float l = active ? logits[t * E + e] : -INFINITY;
    const float m = red.max(l);
    const float sum = red.sum(active ? expf(l - m) : 0.0f);
    const float lse = m + logf(sum);
    lse_sq += double(lse) * double(lse);
  }
  __syncthreads();
  double* row = partial + int64_t(blockIdx.x) * (2 * E + 1);
  if (active) {
    row[e] = double(counts[e]);
    row[E + e] = r_sum;
  }
  if (threadIdx.x == 0) row[2 * E] = lse_sq;
}

// Second pass: stats[i] = the sum over chunks in double, rounded once to fp32. One warp per i:
// lane l sums chunks l, l + 32, ... in order, then the lanes' sums meet in one fixed shuffle tree
// (deterministic): 5 us on DeepSeek-V3's shapes at 4096 tokens, where one thread per i summing
// its 512 chunks in turn took 60 us.
__global__ void router_stats_final_kernel(const double* partial, int64_t num_chunks, int width,
                                          float* stats) {
  const int i = int((blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32), lane = threadIdx.x % 32;
  if (i >= width) return;  // the same for the whole warp
  double acc = 0.0;
  for (int64_t c = lane; c < num_chunks; c += 32) acc += partial[c * width + i];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) stats[i] = float(acc);
}

struct BwdArgs {
  int E, K;
  bool softmax, after_topk, normalize, aux, z;
  float scaling, aux_coef, z_coef;
};

// One token per block, thread e = expert e; the CPU's sums over k become block sums over experts
// where the unselected ones add 0. Dynamic shared memory: slot_of [E] int (k of expert e, or -1).
__global__ void __launch_bounds__(1024)
    router_bwd_kernel(const float* logits, const float* scores, const int32_t* idx, const float* dp,
                      const float* counts, BwdArgs a, float* dlogits) {
  __shared__ Key reduce_buf[64];
  extern __shared__ int slot_of[];
  BlockReducer red(reduce_buf);
  const int64_t t = blockIdx.x;
  const int e = threadIdx.x;
  const bool active = e < a.E;
  if (active) slot_of[e] = -1;
  __syncthreads();
  for (int k = threadIdx.x; k < a.K; k += blockDim.x) {
    const int32_t x = idx[t * a.K + k];
    if (x >= 0 && x < a.E) slot_of[x] = k;
  }
  __syncthreads();
  const int slot = active ? slot_of[e] : -1;
  const bool selected = slot >= 0;
  const float l = active ? logits[t * a.E + e] : -INFINITY;
  const float s = active ? scores[t * a.E + e] : 0.0f;

  // p_raw: the gathered score, or the softmax over the selected logits.
  float p_raw = 0.0f;
  if (a.after_topk) {
    const float m = red.max(selected ? l : -INFINITY);
    const float ex = selected ? expf(l - m) : 0.0f;
    const float sum = red.sum(ex);
    p_raw = selected ? ex / sum : 0.0f;
  } else if (selected) {
    p_raw = s;
  }

  // Through scaling, then normalize: p_n = p_raw / (S + eps) gives
  // dL/dp_raw_j = (g_j - sum_k g_k p_n_k) / (S + eps).
  float g = selected ? a.scaling * dp[t * a.K + slot] : 0.0f;
  if (a.normalize) {
    const float denom = red.sum(p_raw) + 1e-20f;
    const float g_dot_pn = red.sum(g * (p_raw / denom));
    g = selected ? (g - g_dot_pn) / denom : 0.0f;
  }

  float dl = 0.0f;
  if (a.after_topk) {
    // Softmax over the selected logits: dl_k = p_k (g_k - sum_m g_m p_m).
    const float dot = red.sum(g * p_raw);
    if (selected) dl += p_raw * (g - dot);
  } else if (a.softmax) {
    // Gather from s = softmax(l): dl_e = s_e (ds_e - <ds, s>), ds = g at the selected experts.
    const float dot = red.sum(g * s);
    dl += s * (g - dot);
  } else if (selected) {
    dl += s * (1.0f - s) * g;  // sigmoid'
  }

  if (a.aux) {
    const float c = active ? counts[e] : 0.0f;
    if (a.softmax) {
      // r = s: dl_e = aux_coef * s_e (c_e - <c, s>).
      const float cs = red.sum(c * s);
      dl += a.aux_coef * s * (c - cs);
    } else {
      // r = s / S: dL/ds_e = aux_coef / S (c_e - <c, r>), then sigmoid' = s (1 - s).
      const float sum = red.sum(s);
      const float cr = red.sum(c * (s / sum));
      dl += a.aux_coef / sum * (c - cr) * s * (1.0f - s);
    }
  }

  if (a.z) {
    // z = z_coef * lse^2: dl_e = z_coef * 2 lse softmax(l)_e, softmax even for sigmoid scores.
    const float m = red.max(l);
    const float ex = active ? expf(l - m) : 0.0f;
    const float sum = red.sum(ex);
    const float lse = m + logf(sum);
    dl += a.z_coef * 2.0f * lse * (ex / sum);
  }
  if (active) dlogits[t * a.E + e] = dl;
}

// The shared router contract (core/router_shape.h), plus the limits of these kernels.
// Returns whether the scores are softmax.
bool check_router(const RouterConfig& cfg, int64_t T, int64_t E, int64_t K) {
  const bool softmax = check_router_shape(cfg, E, K);
  MOE_CHECK(E <= kMaxExperts, "the CUDA router supports E <= " << kMaxExperts << ", got " << E);
  MOE_CHECK(T >= 0 && T <= std::numeric_limits<int32_t>::max(),
            "the CUDA router needs 0 <= T <= 2^31 - 1 (one block per token), got " << T);
  return softmax;
}

// A whole number of warps covering the experts.
int threads_for(int64_t E) { return int((E + 31) / 32 * 32); }

}  // namespace

void router_topk(const float* logits, const float* expert_bias, const int32_t* forced_idx,
                 const RouterConfig& cfg, int64_t T, int64_t E, int64_t K, float* scores,
                 int32_t* idx, float* p, cudaStream_t stream) {
  TopkArgs a{};
  a.softmax = check_router(cfg, T, E, K);
  if (T == 0) return;
  a.E = int(E);
  a.K = int(K);
  a.after_topk = cfg.softmax_after_topk;
  a.normalize = cfg.normalize_topk;
  a.scaling = float(cfg.scaling);
  a.groups = cfg.groups > 1 ? int(cfg.groups) : 1;
  a.group_topk = a.groups > 1 ? int(cfg.group_topk) : 1;
  a.group_size = int(E) / a.groups;
  a.per_group = int(K) / a.group_topk;
  if (a.groups == 1 && E <= 32 * kWarpChunks) {
    // A warp per token: Qwen3-30B-A3B's 128 experts at 4096 tokens 21.7 us with a block per
    // token, 16.8 us so (one H100, results/2026-11-27-session26), the results bit for bit equal.
    const unsigned blocks = unsigned((T + kWarpTokensPerBlock - 1) / kWarpTokensPerBlock);
    auto go = [&](auto chunks_tag) {
      router_topk_warp_kernel<decltype(chunks_tag)::value>
          <<<blocks, 32 * kWarpTokensPerBlock, 0, stream>>>(logits, expert_bias, forced_idx, a, T,
                                                            scores, idx, p);
    };
    const int64_t chunks = (E + 31) / 32;
    if (chunks <= 1)
      go(std::integral_constant<int, 1>{});
    else if (chunks <= 2)
      go(std::integral_constant<int, 2>{});
    else if (chunks <= 4)
      go(std::integral_constant<int, 4>{});
    else
      go(std::integral_constant<int, kWarpChunks>{});
  } else {
    const size_t smem = a.groups > 1 ? sizeof(float) * size_t(E + 2 * a.groups) : 0;
    router_topk_kernel<<<unsigned(T), threads_for(E), smem, stream>>>(
        logits, expert_bias, forced_idx, a, scores, idx, p);
  }
  CUDA_CHECK(cudaGetLastError());
}

void router_loss_stats(const float* logits, const float* scores, const int32_t* idx,
                       const RouterConfig& cfg, int64_t T, int64_t E, int64_t K, float* stats,
                       void* scratch, cudaStream_t stream) {
  const bool softmax = check_router(cfg, T, E, K);
  const int64_t num_chunks = router_stats_chunks(T);
  double* partial = static_cast<double*>(scratch);
  MOE_CHECK(num_chunks == 0 || partial, "router_loss_stats needs "
                                            << router_loss_stats_scratch_bytes(T, E)
                                            << " bytes of scratch, got nullptr");
  if (num_chunks > 0) {
    router_stats_partial_kernel<<<unsigned(num_chunks), threads_for(E), sizeof(int) * size_t(E),
                                  stream>>>(logits, scores, idx, softmax, T, int(E), int(K),
                                            partial);
    CUDA_CHECK(cudaGetLastError());
  }
  // Runs for T == 0 too, so that stats become zeros as on the CPU.
  const int width = int(2 * E + 1);
  router_stats_final_kernel<<<(width + 7) / 8, 256, 0, stream>>>(partial, num_chunks, width, stats);
  CUDA_CHECK(cudaGetLastError());
}

void router_bwd(const float* logits, const float* scores, const int32_t* idx, const float* dp,
                const float* global_counts, const RouterConfig& cfg, int64_t N, int64_t T,
                int64_t E, int64_t K, float* dlogits, cudaStream_t stream) {
  BwdArgs a{};
  a.softmax = check_router(cfg, T, E, K);
  MOE_CHECK(T == 0 || N >= T, "router_bwd: global token count N=" << N << " below T=" << T);
  if (T == 0) return;
  a.E = int(E);
  a.K = int(K);
  a.after_topk = cfg.softmax_after_topk;
  a.normalize = cfg.normalize_topk;
  a.scaling = float(cfg.scaling);
  // Coefficients in double, then fp32, exactly as the CPU twin.
  a.aux = cfg.aux_coeff != 0.0;
  a.z = cfg.z_coeff != 0.0;
  a.aux_coef = float(cfg.aux_coeff * double(E) / (double(K) * double(N) * double(N)));
  a.z_coef = float(cfg.z_coeff / double(N));
  MOE_CHECK(!a.aux || global_counts, "router_bwd: aux_coeff != 0 needs global_counts");
  router_bwd_kernel<<<unsigned(T), threads_for(E), sizeof(int) * size_t(E), stream>>>(
      logits, scores, idx, dp, global_counts, a, dlogits);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace moe::cuda
