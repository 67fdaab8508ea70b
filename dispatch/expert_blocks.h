#pragma once
// The expert-major blocks of a rank whose dispatcher places rows itself (allgather,
// alltoall_dedup) rather than through the all-to-all's regroup: from the rows each source sends
// each local expert, counted on the device, the experts' row offsets padded to align, where each
// (source, expert) block begins in its source's order and in expert-major order (core/layout.h
// expert_block_table), all computed on the device; then the zeroing of the padding rows. The
// host copy (offsets for a per-expert GEMM loop, the rows received) comes with one copy, in the
// step unless the step is sync-free, else when it is first asked for after it.
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/ops.h"
#include "dispatch/owned_buffers.h"

namespace moe {

class ExpertBlocks {
 public:
  // The table comes from `buffers` (the dispatcher's, for its whole life). rows_bound: the most
  // expert-major rows any routing gives the dispatcher (its sync-free buffers' rows).
  ExpertBlocks(const Dims& d, Device& device, Ops& ops, OwnedBuffers& buffers, int64_t rows_bound);
  // Bytes of device memory it holds, for the memory estimate.
  static int64_t device_bytes(int64_t ep, int64_t E_local);

  // From the d.ep sources' counts on the device: source s's rows for local expert l at
  // counts[s * stride + first + l], the rows before them in its send order the sum of
  // counts[s * stride + e], e < first. Copies the result to the host unless the step is
  // sync-free (Dims::sync_free).
  void plan(const int32_t* counts, int64_t stride, int64_t first);
  // The experts' offsets: on the device; on the host too unless the step is sync-free.
  ExpertOffsets offsets() const;
  // Rows received before the padding, and with it (host figures: after a sync-free step this
  // copies them there).
  int64_t rows_received();
  int64_t rows_padded();
  // On the device: source s's starts [E_local + 1] and dest [E_local] (expert_major_positions').
  const int32_t* starts(int64_t s) const { return table_ + s * (d_.E_local + 1); }
  const int32_t* dest(int64_t s) const {
    return table_ + d_.ep * (d_.E_local + 1) + s * d_.E_local;
  }
  // The GEMMs run over the padding rows and the weight gradients sum over them, so they must be
  // zeros; their places change every step. rows: the Dims of the rows the buffer holds (their H,
  // dtype), the planned Dims' or a dispatcher's dispatched rows.
  void zero_padding(void* expert_major, const Dims& rows);

 private:
  void copy_to_host();
  const int32_t* rows() const { return table_ + d_.ep * (2 * d_.E_local + 1); }

  Dims d_;
  Device& device_;
  Ops& ops_;
  int64_t rows_bound_ = 0;
  // One allocation, so that one copy brings it to the host: offsets [E_local + 1] i64, then the
  // table (core/layout.h expert_block_table).
  int64_t* offsets_dev_ = nullptr;
  int32_t* table_ = nullptr;
  std::vector<int64_t> host_;  // the same bytes on the host
  bool host_stale_ = true;
};

}  // namespace moe
