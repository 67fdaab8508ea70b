#pragma once
// CUDA twin of kernels/cpu/layout.h: the dispatch layout, deterministic, with the CPU twin's
// drop rule. Same names, argument order and results as the twin (integers exact).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/layout.h"
#include "core/workload.h"

namespace moe::cuda {

// expert_counts [E] i32, send_pos [T*K] i32 (order: expert, then t*K + k; -1 for a row dropped
// by the capacity), deterministic, with the CPU twin's drop rule. scratch: device memory of
// core/router_scratch.h's dispatch_layout_scratch_bytes (its contents need not be set); without
// it, and where E needs more shared memory than the range kernels have, a block per expert scans
// all rows. p may be nullptr unless dropping by probability.
void dispatch_layout(const int32_t* idx, const float* p, int64_t T, int64_t K, int64_t E,
                     int64_t capacity, bool drop_by_position, int32_t* expert_counts,
                     int32_t* send_pos, void* scratch, cudaStream_t stream);

// slots [n] i32 = slot_of[idx[i]], the twin's experts_to_slots; all on the device.
void experts_to_slots(const int32_t* idx, int64_t n, const int32_t* slot_of, int32_t* slots,
                      cudaStream_t stream);

// offsets [E_local + 1] i64 on the device from counts on the device: core/layout.h's
// expert_major_offsets_strided, computed where the counts are.
void expert_offsets(const int32_t* counts, int64_t ep, int64_t stride, int64_t E_local,
                    int64_t align, int64_t* offsets, cudaStream_t stream);

// table [expert_block_table_entries] i32 and offsets [E_local + 1] i64 on the device from
// counts on the device: core/layout.h's expert_block_table, computed where the counts are.
void expert_blocks(const int32_t* counts, int64_t ep, int64_t stride, int64_t first,
                   int64_t E_local, int64_t align, int32_t* table, int64_t* offsets,
                   cudaStream_t stream);

// offsets [E_local + 1] and blocks [3, merged_chunk_blocks] i64 on the device from the chunks'
// counts and offsets there (device pointers in `chunks`, at most kMaxOverlapChunks of them):
// core/layout.h's merged_chunk_layout, computed where the counts are.
void merge_chunk_layout(const ChunkRows* chunks, int64_t C, int64_t ep, int64_t E_local,
                        int64_t align, int64_t* offsets, int64_t* blocks, cudaStream_t stream);

// pos [sources * rows_per_source] i32: each gathered routed row's place in this rank's
// expert-major buffer, -1 where another rank's experts take it or it was dropped; starts
// [sources, E_local + 1] and dest [sources, E_local] i32 on the device (the twin's contract).
void expert_major_positions(const int32_t* send_pos, const int32_t* starts, const int32_t* dest,
                            int64_t sources, int64_t rows_per_source, int64_t E_local, int32_t* pos,
                            cudaStream_t stream);

// The deduplicated dispatcher's send plan: wire_pos [T, ep], wire_counts [ep], slots [W, K] i32
// and weights [W, K] fp32, the twin's contract; all inputs on the device (dispatch_layout's
// expert_counts [E] and send_pos [T*K], idx [T, K], p [T, K]).
// scratch: device memory of at least dedup_layout_scratch_bytes (the chunks' counts).
size_t dedup_layout_scratch_bytes(int64_t T, int64_t ep);
void dedup_layout(const int32_t* idx, const float* p, const int32_t* expert_counts,
                  const int32_t* send_pos, int64_t T, int64_t K, int64_t E, int64_t ep,
                  int32_t* wire_pos, int32_t* wire_counts, int32_t* slots, float* weights,
                  void* scratch, cudaStream_t stream);

}  // namespace moe::cuda
