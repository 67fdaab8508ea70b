#pragma once
// Comm over MPI: the CPU backend's collectives (host memory).
#include <mpi.h>

#include <string>

#include "comm/comm.h"
#include "core/mesh.h"

namespace moe {

class MpiComm : public Comm {
 public:
  // Splits world into the mesh's EP groups (same fsdp_rank) and FSDP groups (same ep_rank). Each
  // collective waits at most timeout_s for the group's other ranks, then aborts the job
  // (comm/bounded_wait.h).
  MpiComm(MPI_Comm world, const Mesh& mesh, double timeout_s = 300);
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  MPI_Comm comm(Group g) const;
  int rank(Group g) const override;
  int size(Group g) const override;
  void alltoallv_rows(const void* send, const int64_t* send_rows, void* recv,
                      const int64_t* recv_rows, size_t row_bytes, Group g) override;
  void alltoall_i32(const int32_t* send, int32_t* recv, int64_t per_rank, Group g) override;
  void allgather(const void* send, void* recv, size_t bytes_per_rank, Group g) override;
  void reduce_scatter(const void* send, void* recv, size_t count_per_rank, DType dtype,
                      Group g) override;
  void allreduce_f32(float* buf, size_t count, Group g) override;
  std::unique_ptr<PeerWindow> open_window(size_t bytes, Group g) override;

 private:
  std::string what(const char* collective, Group g) const;

  MPI_Comm world_, ep_, fsdp_;
  double timeout_s_;
};

}  // namespace moe
