#pragma once
// Comm over NCCL: the CUDA backend's collectives, enqueued on the CudaDevice's current stream (its
// main lane, or the side lane while one is open: Device::fork_side). Communicators: world from a
// unique id broadcast over MPI, then EP and FSDP groups with ncclCommSplit.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <string>

#include "comm/comm.h"
#include "core/error.h"
#include "core/mesh.h"
#include "kernels/cuda/cuda_device.h"

namespace moe {

class NcclComm : public Comm {
 public:
  // Enqueues on device.stream(), read at each call (the side lane's, where the step put it).
  NcclComm(MPI_Comm world, const Mesh& mesh, CudaDevice& device, double timeout_s);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank(Group g) const override;
  int size(Group g) const override;
  void alltoallv_rows(const void* send, const int64_t* send_rows, void* recv,
                      const int64_t* recv_rows, size_t row_bytes, Group g) override;
  void alltoall_i32(const int32_t* send, int32_t* recv, int64_t per_rank, Group g) override;
  void allgather(const void* send, void* recv, size_t bytes_per_rank, Group g) override;
  void reduce_scatter(const void* send, void* recv, size_t count_per_rank, DType dtype,
                      Group g) override;
  void allreduce_f32(float* buf, size_t count, Group g) override;
  // A CudaIpcWindow over the group's ranks (comm/cuda_ipc_window.h).
  std::unique_ptr<PeerWindow> open_window(size_t bytes, Group g) override;

  // Waits for the stream, but never forever: polls the stream and every communicator's async
  // error, and after timeout_s aborts the communicators and throws (naming what it waited for),
  // so that a dead or failed peer cannot leave this rank hanging.
  void wait(const char* what);

 private:
  ncclComm_t comm(Group g) const;
  ncclComm_t world_ = nullptr, ep_ = nullptr, fsdp_ = nullptr;
  // The same groups over MPI, for what is set up on the host (a window's IPC handles).
  MPI_Comm mpi_world_ = MPI_COMM_NULL, mpi_ep_ = MPI_COMM_NULL, mpi_fsdp_ = MPI_COMM_NULL;
  CudaDevice& device_;
  double timeout_s_;
};

}  // namespace moe
