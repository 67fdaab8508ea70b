#pragma once
// Memory that every rank of a group writes into directly: each rank holds `bytes` of it and
// addresses the others' as its own (CUDA IPC mappings over NVLink on the CUDA backend, MPI-3
// shared memory on the CPU backend), with a barrier that orders those writes with the lanes'
// work. The nvlink dispatcher's landing buffers (dispatch/nvlink.h). Comm::open_window makes one.
#include <cstddef>
#include <vector>

#include "core/mesh.h"  // kMaxWindowRanks

namespace moe {

// Memory a window may hold ahead of its bytes (CudaIpcWindow's barrier flags), for estimates.
constexpr size_t kWindowHeaderBytes = 256;

class PeerWindow {
 public:
  virtual ~PeerWindow() = default;
  int ranks() const { return int(bases_.size()); }
  int rank() const { return rank_; }
  // Rank r's memory, as this rank's kernels and copies address it: peer(rank()) is its own.
  void* peer(int r) const { return bases_.at(size_t(r)); }

  // bytes from src (this rank's memory) to rank r's memory at offset, on the current lane.
  virtual void put(int r, size_t offset, const void* src, size_t bytes) = 0;
  // On the current lane: returns (lets later work run) once every rank of the group has reached
  // its barrier, so that what any rank wrote into any window before its barrier can be read.
  // Every rank calls its barriers in the same order. A rank that never comes makes the others
  // fail within the run's wait bound, never hang.
  virtual void barrier() = 0;

 protected:
  std::vector<void*> bases_;
  int rank_ = 0;
  size_t bytes_ = 0;
};

}  // namespace moe
