#pragma once
// PeerWindow over MPI-3 shared memory (MPI_Win_allocate_shared): the CPU backend's, so that the
// nvlink dispatcher's writes into other ranks' memory, and its barriers, run in CI as they do
// between GPUs. Every rank of the group must share one host.
#include <mpi.h>

#include "comm/peer_window.h"

namespace moe {

// A window's group, checked on every rank alike: at most kMaxWindowRanks ranks, all on this host
// (a user error otherwise). Returns the group's communicator among this host's ranks (the
// caller frees it).
MPI_Comm window_host_group(MPI_Comm group, double timeout_s);

class MpiWindow : public PeerWindow {
 public:
  // Collective over `group`; what the bounded waits name; the run's wait bound.
  MpiWindow(MPI_Comm group, size_t bytes, double timeout_s);
  ~MpiWindow() override;
  MpiWindow(const MpiWindow&) = delete;
  MpiWindow& operator=(const MpiWindow&) = delete;

  void put(int r, size_t offset, const void* src, size_t bytes) override;
  void barrier() override;

 private:
  MPI_Comm group_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  double timeout_s_;
};

}  // namespace moe
