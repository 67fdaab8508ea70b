#pragma once
// The collectives one training step needs, behind one interface: MpiComm (CPU backend) and, later,
// NcclComm (CUDA backend). Buffers are the backend's memory; counts live on the host.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "comm/peer_window.h"
#include "core/workload.h"

namespace moe {

enum class Group { kWorld, kEp, kFsdp };
const char* group_name(Group g);

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank(Group g) const = 0;
  virtual int size(Group g) const = 0;

  // Ragged all-to-all of rows of row_bytes: send_rows[r] rows go to group rank r, in rank order
  // from send; recv_rows[r] rows arrive from rank r, in rank order into recv.
  virtual void alltoallv_rows(const void* send, const int64_t* send_rows, void* recv,
                              const int64_t* recv_rows, size_t row_bytes, Group g) = 0;
  // Fixed-size all-to-all of int32: `per_rank` values to and from every group rank.
  virtual void alltoall_i32(const int32_t* send, int32_t* recv, int64_t per_rank, Group g) = 0;
  // recv [size * bytes_per_rank] = every rank's send [bytes_per_rank], in rank order.
  virtual void allgather(const void* send, void* recv, size_t bytes_per_rank, Group g) = 0;
  // recv [count_per_rank] = this rank's chunk of the element-wise sum of send [size * count],
  // elements of dtype as the backend keeps them. For bf16, NcclComm sums bf16 on the GPU;
  // MpiComm (the CPU backend keeps bf16 values as floats) sums the floats and rounds the result.
  virtual void reduce_scatter(const void* send, void* recv, size_t count_per_rank, DType dtype,
                              Group g) = 0;
  // In-place element-wise sum over the group.
  virtual void allreduce_f32(float* buf, size_t count, Group g) = 0;

  // `bytes` of memory on each rank of group g that the others write into directly (collective:
  // every rank of the group calls it). Refused with a user error where the backend cannot map a
  // peer's memory (ranks on other hosts).
  virtual std::unique_ptr<PeerWindow> open_window(size_t bytes, Group g) = 0;
};

}  // namespace moe
