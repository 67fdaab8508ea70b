#include "dispatch/expert_blocks.h"

#include "core/layout.h"

namespace moe {

namespace {

int64_t table_entries(int64_t ep, int64_t E_local, int64_t align) {
  return ep * (2 * E_local + 1) + E_local * (align - 1);
}

}  // namespace

ExpertBlocks::ExpertBlocks(const Dims& d, Device& device, Ops& ops, OwnedBuffers& buffers)
    : d_(d), device_(device), ops_(ops) {
  table_host_.resize(table_entries(d.ep, d.E_local, d.align));
  table_ = buffers.alloc<int32_t>(4 * table_host_.size());
  if (d.align > 1) zero_row_ = buffers.alloc(device.storage_bytes() * d.H);  // zero-filled
  offsets_.assign(d.E_local + 1, 0);
  offsets_dev_ = buffers.alloc<int64_t>(8 * (d.E_local + 1));
}

int64_t ExpertBlocks::device_bytes(int64_t ep, int64_t E_local, int64_t align, int64_t H,
                                   int64_t storage_bytes) {
  return 4 * table_entries(ep, E_local, align) + 8 * (E_local + 1) +
         (align > 1 ? H * storage_bytes : 0);
}

void ExpertBlocks::plan(const int32_t* counts, const int32_t* base, const int32_t* counts_dev,
                        int64_t stride) {
  const int64_t ep = d_.ep, El = d_.E_local;
  int32_t* starts = table_host_.data();
  int32_t* dest = starts + ep * (El + 1);
  int32_t* padding = dest + ep * El;
  block_layout(counts, ep, El, d_.align, base, offsets_.data(), starts, dest);
  rows_received_ = 0;
  num_padding_ = 0;
  for (int64_t l = 0; l < El; ++l) {
    int64_t rows = 0;
    for (int64_t s = 0; s < ep; ++s) rows += counts[s * El + l];
    rows_received_ += rows;
    for (int64_t r = offsets_[l] + rows; r < offsets_[l + 1]; ++r)
      padding[num_padding_++] = int32_t(r);
  }
  device_.copy_to_device(table_, table_host_.data(), 4 * size_t(padding - starts + num_padding_));
  ops_.expert_offsets(d_, counts_dev, stride, offsets_dev_);
}

void ExpertBlocks::zero_padding(void* expert_major) {
  if (num_padding_ == 0) return;
  Dims one = d_;
  one.T = 1;
  one.K = num_padding_;
  ops_.permute(one, zero_row_, table_ + d_.ep * (2 * d_.E_local + 1), expert_major);
}

}  // namespace moe
