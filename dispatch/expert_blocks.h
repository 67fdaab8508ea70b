#pragma once
// The expert-major blocks of a rank whose dispatcher places rows itself (allgather,
// alltoall_dedup) rather than through the all-to-all's regroup: from the rows each source sends
// each local expert, the experts' row offsets padded to align, where each (source, expert) block
// begins in its source's order and in expert-major order (core/layout.h block_layout), and the
// padding rows, uploaded as one table once a step; then the zeroing of those padding rows.
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/ops.h"
#include "dispatch/owned_buffers.h"

namespace moe {

class ExpertBlocks {
 public:
  // The table and a zero row come from `buffers` (the dispatcher's, for its whole life).
  ExpertBlocks(const Dims& d, Device& device, Ops& ops, OwnedBuffers& buffers);
  // Bytes of device memory it holds, for the memory estimate: the table, the offsets and, where
  // align > 1, a zero row of H storage elements.
  static int64_t device_bytes(int64_t ep, int64_t E_local, int64_t align, int64_t H,
                              int64_t storage_bytes);

  // counts [ep, E_local] (host): rows source s sends local expert l; base [ep] (host): where
  // source s's rows for this rank begin in its order (nullptr: at 0). counts_dev: the same counts
  // on the device, source s's at counts_dev[s * stride], from which the device offsets come.
  void plan(const int32_t* counts, const int32_t* base, const int32_t* counts_dev, int64_t stride);
  // The experts' offsets [E_local + 1], on the host and on the device.
  ExpertOffsets offsets() const { return {offsets_dev_, offsets_.data(), offsets_[d_.E_local]}; }
  int64_t rows_received() const { return rows_received_; }  // before the padding
  // On the device: source s's starts [E_local + 1] and dest [E_local] (expert_major_positions').
  const int32_t* starts(int64_t s) const { return table_ + s * (d_.E_local + 1); }
  const int32_t* dest(int64_t s) const {
    return table_ + d_.ep * (d_.E_local + 1) + s * d_.E_local;
  }
  // The GEMMs run over the padding rows and the weight gradients sum over them, so they must be
  // zeros; their places change every step. A permute of one zero row to each of them writes them.
  void zero_padding(void* expert_major);

 private:
  Dims d_;
  Device& device_;
  Ops& ops_;
  int32_t* table_ = nullptr;        // starts [ep, E_local + 1], dest [ep, E_local], padding rows
  void* zero_row_ = nullptr;        // [H] storage zeros (align > 1)
  int64_t* offsets_dev_ = nullptr;  // [E_local + 1]
  std::vector<int32_t> table_host_;
  std::vector<int64_t> offsets_;
  int64_t rows_received_ = 0, num_padding_ = 0;
};

}  // namespace moe
