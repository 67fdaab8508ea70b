#include "dispatch/expert_blocks.h"

#include "core/error.h"
#include "core/layout.h"

namespace moe {
namespace {

// int64 words of the offsets and the table together.
int64_t words(int64_t ep, int64_t E_local) {
  return E_local + 1 + (expert_block_table_entries(ep, E_local) + 1) / 2;
}

}  // namespace

ExpertBlocks::ExpertBlocks(const Dims& d, Device& device, Ops& ops, OwnedBuffers& buffers,
                           int64_t rows_bound)
    : d_(d), device_(device), ops_(ops), rows_bound_(rows_bound) {
  host_.assign(words(d.ep, d.E_local), 0);
  offsets_dev_ = buffers.alloc<int64_t>(8 * host_.size());
  table_ = reinterpret_cast<int32_t*>(offsets_dev_ + d.E_local + 1);
}

int64_t ExpertBlocks::device_bytes(int64_t ep, int64_t E_local) { return 8 * words(ep, E_local); }

void ExpertBlocks::plan(const int32_t* counts, int64_t stride, int64_t first) {
  ops_.expert_blocks(d_, counts, stride, first, table_, offsets_dev_);
  host_stale_ = true;
  if (!d_.sync_free) copy_to_host();
}

void ExpertBlocks::copy_to_host() {
  device_.copy_to_host(host_.data(), offsets_dev_, 8 * host_.size());
  host_stale_ = false;
}

ExpertOffsets ExpertBlocks::offsets() const {
  if (d_.sync_free) return {offsets_dev_, nullptr, rows_bound_};
  MOE_CHECK(!host_stale_, "expert blocks: offsets asked for before plan()");
  return {offsets_dev_, host_.data(), host_[d_.E_local]};
}

int64_t ExpertBlocks::rows_received() {
  if (host_stale_) copy_to_host();
  const auto* rows = reinterpret_cast<const int32_t*>(host_.data() + d_.E_local + 1) +
                     d_.ep * (2 * d_.E_local + 1);
  int64_t n = 0;
  for (int64_t l = 0; l < d_.E_local; ++l) n += rows[l];
  return n;
}

int64_t ExpertBlocks::rows_padded() {
  const int64_t received = rows_received();  // brings the offsets to the host too
  return host_[d_.E_local] - received;
}

void ExpertBlocks::zero_padding(void* expert_major, const Dims& rows_of) {
  if (d_.align > 1) ops_.zero_expert_padding(rows_of, rows(), offsets_dev_, expert_major);
}

}  // namespace moe
