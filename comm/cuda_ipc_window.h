#pragma once
// PeerWindow over CUDA IPC: each rank's window is CudaDevice memory whose IPC handle the group
// exchanges over MPI, and which the others map (cudaIpcOpenMemHandle); kernels and copy engines
// then write a peer's memory over NVLink with plain stores. The barrier is a one-block kernel on
// the current stream: each rank stores its barrier count into every peer's flag for it (after a
// system-scope fence) and spins until every peer's flag for it has reached the same count. No
// NVLink multicast (../shared/GPU.md forbids it): load/store over peer mappings only.
//
// Why CUDA IPC and not NCCL's symmetric memory windows: the windows need NCCL 2.27+ and its
// device API, while IPC mappings need only the runtime, exchange their handles over the MPI the
// run already has, and are captured by CUDA graphs as plain kernels and copies.
#include <mpi.h>

#include <cstdint>

#include "comm/peer_window.h"
#include "kernels/cuda/cuda_device.h"

namespace moe {

class CudaIpcWindow : public PeerWindow {
 public:
  // Collective over `group` (one host's ranks, at most kMaxWindowRanks); a barrier that waits
  // longer than timeout_s for a peer ends the process with a message (a trap in the kernel).
  CudaIpcWindow(MPI_Comm group, CudaDevice& device, size_t bytes, double timeout_s);
  ~CudaIpcWindow() override;
  CudaIpcWindow(const CudaIpcWindow&) = delete;
  CudaIpcWindow& operator=(const CudaIpcWindow&) = delete;

  void put(int r, size_t offset, const void* src, size_t bytes) override;
  void barrier() override;

 private:
  MPI_Comm group_ = MPI_COMM_NULL;
  CudaDevice& device_;
  double timeout_s_;
  void* mine_ = nullptr;                  // this rank's allocation: the flags, then the window
  int64_t* flags_[kMaxWindowRanks] = {};  // each rank's flags, as this rank addresses them
  std::vector<void*> opened_;             // the peers' mappings, closed with the window
};

}  // namespace moe
