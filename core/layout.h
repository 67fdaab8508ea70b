#pragma once
// Layout math every backend and dispatcher shares: where rows sit once they reach their experts.
#include <cstdint>

namespace moe {

// offsets [E_local + 1]: where each local expert's rows start in expert-major order, given
// counts [ep, E_local] (rows source rank s sends local expert l), each expert's block rounded up
// to a multiple of align; offsets[E_local] = rows including the padding.
void expert_major_offsets(const int32_t* counts, int64_t ep, int64_t E_local, int64_t align,
                          int64_t* offsets);
// The same with source s's counts at counts[s * stride, s * stride + E_local): a slice of wider
// rows (the all-gather dispatcher's [ep, E] counts).
void expert_major_offsets_strided(const int32_t* counts, int64_t ep, int64_t stride,
                                  int64_t E_local, int64_t align, int64_t* offsets);

// Where each (source rank, local expert) block of a receiving rank's rows lands, from counts
// [ep, E_local] (rows source s sends local expert l) and base [ep] (where source s's rows for this
// rank begin in its own send order; nullptr: at 0). offsets [E_local + 1] as expert_major_offsets;
// starts [ep, E_local + 1]: where local expert l's rows begin in source s's send order
// ([s, E_local]: where this rank's rows end); dest [ep, E_local]: where block (s, l) begins in
// expert-major order, sources in rank order inside each expert, as the all-to-all's regroup
// places them.
void block_layout(const int32_t* counts, int64_t ep, int64_t E_local, int64_t align,
                  const int32_t* base, int64_t* offsets, int32_t* starts, int32_t* dest);

// The all-gather dispatcher's counts on EP rank `rank` of ep, from every source rank's
// expert_counts, counts_all [ep, E] (rows kept per expert, after capacity drops): recv
// [ep, E_local], the rows each source routes to this rank's experts (what an all-to-all would
// deliver), and base [ep], where they begin in each source's send order (by expert, then
// t*K + k).
void gathered_counts(const int32_t* counts_all, int64_t ep, int64_t E, int64_t rank, int32_t* recv,
                     int32_t* base);

// The all-gather dispatcher's plan: gathered_counts, then block_layout over them (offsets
// [E_local + 1], starts [ep, E_local + 1] in each source's send order, dest [ep, E_local]).
void gathered_layout(const int32_t* counts_all, int64_t ep, int64_t E, int64_t rank, int64_t align,
                     int32_t* recv, int64_t* offsets, int32_t* starts, int32_t* dest);

// The expert-major blocks as the dispatchers that place rows themselves keep them on the device
// (dispatch/expert_blocks.h), from counts where they are: source s's rows for local expert l at
// counts[s * stride + first + l], and the rows before them in its send order (base) the sum of
// counts[s * stride + e], e < first. table: starts [ep, E_local + 1] and dest [ep, E_local] as
// block_layout's, then rows [E_local] (each expert's rows before its padding); offsets
// [E_local + 1] as expert_major_offsets'. Entries of the table: expert_block_table_entries.
int64_t expert_block_table_entries(int64_t ep, int64_t E_local);
void expert_block_table(const int32_t* counts, int64_t ep, int64_t stride, int64_t first,
                        int64_t E_local, int64_t align, int32_t* table, int64_t* offsets);

// One chunk of a pipelined step's expert-major rows (memory of the backend that holds them).
struct ChunkRows {
  // [ep, stride]: the rows source rank s sends local expert l at counts[s * stride + l]. Inside
  // expert l's block the sources come in rank order, each's rows in token order (every
  // dispatcher's expert-major order), the padding after them all.
  const int32_t* counts = nullptr;
  int64_t stride = 0;
  const int64_t* offsets = nullptr;  // [E_local + 1] the chunk's, padding included
  int64_t row_begin = 0;             // its first row in the buffers the chunks share
};

// The rows of C chunks laid out as one unchunked step lays out the same rows: each local expert's
// by source rank, then chunk (a source's chunks are consecutive runs of its tokens, so this is
// token order, as the unchunked step has it), padded to a multiple of align once, after them all.
// offsets [E_local + 1] as expert_major_offsets'; blocks [3, n], n = E_local * ep * C, block
// b = (l * ep + s) * C + c: its first row in the chunks' buffers (blocks[b]), in the merged
// layout (blocks[n + b]) and its rows (blocks[2n + b]).
int64_t merged_chunk_blocks(int64_t chunks, int64_t ep, int64_t E_local);
void merged_chunk_layout(const ChunkRows* chunks, int64_t C, int64_t ep, int64_t E_local,
                         int64_t align, int64_t* offsets, int64_t* blocks);

}  // namespace moe
