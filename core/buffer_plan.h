#pragma once
// The step's buffers on one rank, planned once: MoeLayer allocates each from this plan and the
// memory estimate sums it, so what --dry-run and the run's memory check predict is what the step
// holds. The dispatcher's own buffers are its (core/dispatcher.h, dispatch_buffer_bytes).
#include <cstddef>
#include <cstdint>

#include "core/mesh.h"
#include "core/workload.h"

namespace moe {

// A piece of a buffer the CUDA backend lays out by these sizes (FP8 codes and scales, the
// router kernels' scratch): 256-byte aligned, as cudaMalloc's own allocations are.
inline size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Bytes of a ragged buffer grown to hold `bytes`: growth leaves a quarter of headroom, because the
// rows per expert drift from step to step and each regrowth costs an allocation in the step.
inline int64_t grown_bytes(int64_t bytes) { return bytes + bytes / 4; }

// Where a chunk's expert-major rows start in the ragged buffers (overlap pipeline) after the
// previous chunk's end at row `end`: on a multiple of 128 rows, so that every chunk's rows start
// 256-byte aligned, as a buffer of its own would, whatever the row's size (the GEMM paths choose
// kernels and algorithms by their operands' alignment).
inline int64_t chunk_rows_begin(int64_t end) {
  return end > INT64_MAX - 127 ? end : (end + 127) / 128 * 128;  // saturated sizes stay so
}

// The shared experts' buffers (all 0 without them). Their weights, flattened [S, H, 2F_sh] and
// [S, F_sh, H], are split over the FSDP group like the routed experts' (and held by every EP
// rank); a shard is ep parts of 1/world each, so that the gradient's reduce-scatter over the world
// and all-gather over the EP group (a sum over every rank) leave each rank its FSDP shard.
struct SharedBuffers {
  int64_t part_in_elems = 0, part_out_elems = 0;    // 1/world of each tensor, rounded up
  int64_t shard_in_elems = 0, shard_out_elems = 0;  // ep parts
  // Weights (storage) and gradients (grad dtype), as BufferPlan's: the full weights only with
  // fsdp > 1, the gradient shards only with fsdp > 1 and its parts only with ep > 1 (otherwise
  // they are the full buffers or the shards themselves).
  int64_t w_in_shard = 0, w_out_shard = 0, w_in_full = 0, w_out_full = 0;
  int64_t dw_in_full = 0, dw_out_full = 0, dw_in_shard = 0, dw_out_shard = 0;
  int64_t dw_in_part = 0, dw_out_part = 0;
  // Activations, storage: h [S, T, 2F_sh], a [S, T, F_sh], y [S, T, H] (then the shared experts'
  // dx); one expert's backward scratch da [T, F_sh] and dh [T, 2F_sh].
  int64_t h = 0, a = 0, y = 0, da = 0, dh = 0;
  int64_t offsets = 0;  // the one "expert"'s row offsets {0, T}, int64 on the device
  int64_t bytes() const;
};

// The most expert-major rows a rank's dispatcher holds for T tokens per rank: every row its EP
// group routes (ep * T * K), each local expert padded to a multiple of align.
int64_t expert_rows_bound(int64_t ep, int64_t T, int64_t K, int64_t E_local, int64_t align);

struct BufferPlan {
  // Expert weights as FSDP shards of this EP rank's flattened [E_local, H, 2F] / [E_local, F, H],
  // padded so that every shard has the same number of elements.
  int64_t shard_in_elems = 0, shard_out_elems = 0;
  // Bytes of each fixed buffer. The full (gathered) weights and the reduced gradient shards exist
  // only with fsdp > 1 (0 here); at fsdp 1 the shard is the whole tensor.
  int64_t w_gate = 0, dw_gate = 0, expert_bias = 0;
  int64_t w_in_shard = 0, w_out_shard = 0, w_in_full = 0, w_out_full = 0;
  int64_t dw_in_full = 0, dw_out_full = 0, dw_in_shard = 0, dw_out_shard = 0;
  int64_t token_rows = 0;  // each of x, dout, out, dx: [T, H] storage
  // dispatch_dtype fp8 (else 0): x packed for the dispatch, [T, fp8_row_bytes(H)] bytes.
  int64_t token_rows_fp8 = 0;
  int64_t dx_acc = 0;        // [T, H] fp32
  int64_t token_scores = 0;  // each of logits, scores, dlogits: [T, E] fp32
  // Each of idx, p, dp, forced_idx where routing is forced, and where expert_placement moves
  // experts the routed rows' slots: [T, K].
  int64_t token_topk = 0;
  int num_token_topk = 3;
  int64_t expert_slots = 0;  // where expert_placement moves experts: each expert's slot, [E] i32
  int64_t stats = 0;         // [2E + 1] fp32
  // fp8_tensor: the scales the backend reports, [chunks][kNumFp8Computed][E_local] fp32
  // (Ops::report_fp8_scales)
  int64_t fp8_scales = 0;
  // Ragged, bytes per expert-major row: each of ye, dye, dxe ([., H] storage), of h and dh
  // ([., 2F]), of a and da ([., F]); of xe, the experts' input, row_h, or with dispatch_dtype fp8
  // the dispatched packed row (core/fp8.h fp8_row_bytes), which is all the experts get of x.
  int64_t row_h = 0, row_2f = 0, row_f = 0, row_xe = 0;
  // Rows the ragged buffers are first sized for, in every chunk (overlap pipeline), each chunk's
  // rows starting where chunk_rows_begin puts them: balanced routing's, each local expert padded;
  // with graph the most any routing gives (expert_rows_bound), which the sync-free step never
  // grows past.
  int64_t planned_rows = 0;
  // graph: the ragged buffers are allocated once, at the bound, with no headroom for growth.
  bool ragged_exact = false;
  // More than one chunk (overlap pipeline): the weight gradients' merged layout of the chunks'
  // rows (core/layout.h merged_chunk_layout: offsets [E_local + 1], blocks [3, C * ep * E_local],
  // int64) and one more ragged buffer of row_xe rows, the gathered xe (the other three gathered
  // operands reuse buffers the backward is done with).
  int64_t merged_offsets = 0, merged_blocks = 0;
  int num_xe = 1;
  SharedBuffers shared;

  // The fixed buffers by what they hold (--dry-run's memory line): the router's and experts'
  // weights, their gradients, the per-token buffers; with the shared experts', all of them.
  int64_t weight_bytes() const;
  int64_t gradient_bytes() const;
  int64_t token_bytes() const;
  int64_t fixed_bytes() const;
  // The ragged buffers grown for `rows` expert-major rows (headroom included unless exact).
  int64_t ragged_bytes(int64_t rows) const;
  // What one ragged buffer allocates to hold `bytes`.
  int64_t ragged_buffer_bytes(int64_t bytes) const {
    return ragged_exact ? bytes : grown_bytes(bytes);
  }
};

// w resolved (mesh set); storage_bytes and grad_bytes per stored element and per expert weight
// gradient element, as the backend keeps them.
BufferPlan plan_step_buffers(const Workload& w, int64_t storage_bytes, int64_t grad_bytes);

}  // namespace moe
