#include "comm/mpi_window.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/bounded_wait.h"
#include "core/error.h"

namespace moe {

MPI_Comm window_host_group(MPI_Comm group, double timeout_s) {
  int size = 0, rank = 0, on_host = 0;
  MPI_CHECK(MPI_Comm_size(group, &size));
  MPI_CHECK(MPI_Comm_rank(group, &rank));
  MOE_USER_CHECK(size <= kMaxWindowRanks, "dispatch = nvlink spans at most "
                                              << kMaxWindowRanks << " ranks (one host's GPUs), "
                                              << "and mesh.ep is " << size
                                              << ": lower mesh.ep or use another dispatch");
  MPI_Comm host;
  MPI_CHECK(MPI_Comm_split_type(group, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host));
  MPI_CHECK(MPI_Comm_size(host, &on_host));
  int all_on_host = on_host == size;
  allreduce_bounded(&all_on_host, 1, MPI_INT, MPI_MIN, group, "the window's host check", timeout_s);
  if (!all_on_host) MPI_Comm_free(&host);
  MOE_USER_CHECK(all_on_host,
                 "dispatch = nvlink writes into the other EP ranks' memory, and "
                 "this EP group spans several hosts: launch every rank of an EP "
                 "group on one host, or use another dispatch");
  return host;
}

MpiWindow::MpiWindow(MPI_Comm group, size_t bytes, double timeout_s) : timeout_s_(timeout_s) {
  group_ = window_host_group(group, timeout_s);
  MPI_CHECK(MPI_Comm_rank(group_, &rank_));
  int size = 0;
  MPI_CHECK(MPI_Comm_size(group_, &size));
  bytes_ = bytes;
  void* mine = nullptr;
  // At least one byte each: MPI may give a zero-byte rank no address to query.
  MPI_CHECK(MPI_Win_allocate_shared(MPI_Aint(std::max<size_t>(bytes, 1)), 1, MPI_INFO_NULL, group_,
                                    &mine, &win_));
  bases_.resize(size_t(size));
  for (int r = 0; r < size; ++r) {
    MPI_Aint got = 0;
    int unit = 0;
    MPI_CHECK(MPI_Win_shared_query(win_, r, &got, &unit, &bases_[size_t(r)]));
  }
  // One passive epoch for the window's life: MPI_Win_sync then orders the direct loads and
  // stores with the barriers.
  MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_));
}

MpiWindow::~MpiWindow() {
  if (win_ != MPI_WIN_NULL) {
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }
  if (group_ != MPI_COMM_NULL) MPI_Comm_free(&group_);
}

void MpiWindow::put(int r, size_t offset, const void* src, size_t bytes) {
  MOE_CHECK(r >= 0 && r < ranks() && offset + bytes <= bytes_,
            "window put of " << bytes << " bytes at " << offset << " to rank " << r << " of "
                             << ranks() << " (" << bytes_ << " bytes each)");
  if (bytes) std::memcpy(static_cast<char*>(peer(r)) + offset, src, bytes);
}

void MpiWindow::barrier() {
  MPI_CHECK(MPI_Win_sync(win_));
  MPI_Request req;
  MPI_CHECK(MPI_Ibarrier(group_, &req));
  wait_bounded(&req, "the nvlink dispatcher's window barrier", timeout_s_);
  MPI_CHECK(MPI_Win_sync(win_));
}

}  // namespace moe
