#include "comm/nccl_comm.h"

#include <chrono>
#include <exception>
#include <thread>

#include "comm/cuda_ipc_window.h"
#include "core/bounded_wait.h"
#include "core/error.h"

namespace moe {
namespace {

ncclComm_t init_world(MPI_Comm world, double timeout_s) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  MPI_CHECK(MPI_Comm_size(world, &size));
  ncclUniqueId id;
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Request req;
  MPI_CHECK(MPI_Ibcast(&id, sizeof(id), MPI_BYTE, 0, world, &req));
  wait_bounded(&req, "the NCCL id's broadcast", timeout_s);
  ncclComm_t c = nullptr;
  NCCL_CHECK(ncclCommInitRank(&c, size, id, rank));
  return c;
}

}  // namespace

NcclComm::NcclComm(MPI_Comm world, const Mesh& mesh, CudaDevice& device, double timeout_s)
    : mpi_world_(world), device_(device), timeout_s_(timeout_s) {
  MPI_CHECK(MPI_Comm_split(world, mesh.fsdp_rank, mesh.ep_rank, &mpi_ep_));
  MPI_CHECK(MPI_Comm_split(world, mesh.ep_rank, mesh.fsdp_rank, &mpi_fsdp_));
  world_ = init_world(world, timeout_s);
  NCCL_CHECK(ncclCommSplit(world_, mesh.fsdp_rank, mesh.ep_rank, &ep_, nullptr));
  NCCL_CHECK(ncclCommSplit(world_, mesh.ep_rank, mesh.fsdp_rank, &fsdp_, nullptr));
}

NcclComm::~NcclComm() {
  // Unwinding from an error on this rank, on the way to MPI_Abort: ncclCommDestroy of split
  // communicators can wait for the peers, and a peer may sit in MPI_Barrier waiting for this rank,
  // so the job would hang (seen on H200 with MOE_FAULT=1:4:throw). Leave them to process exit.
  if (std::uncaught_exceptions() > 0) return;
  for (ncclComm_t c : {fsdp_, ep_, world_})
    if (c) ncclCommDestroy(c);
  MPI_Comm_free(&mpi_ep_);
  MPI_Comm_free(&mpi_fsdp_);
}

std::unique_ptr<PeerWindow> NcclComm::open_window(size_t bytes, Group g) {
  MPI_Comm c = g == Group::kWorld ? mpi_world_ : g == Group::kEp ? mpi_ep_ : mpi_fsdp_;
  return std::make_unique<CudaIpcWindow>(c, device_, bytes, timeout_s_);
}

ncclComm_t NcclComm::comm(Group g) const {
  return g == Group::kWorld ? world_ : g == Group::kEp ? ep_ : fsdp_;
}

int NcclComm::rank(Group g) const {
  int r = 0;
  NCCL_CHECK(ncclCommUserRank(comm(g), &r));
  return r;
}

int NcclComm::size(Group g) const {
  int n = 0;
  NCCL_CHECK(ncclCommCount(comm(g), &n));
  return n;
}

void NcclComm::alltoallv_rows(const void* send, const int64_t* send_rows, void* recv,
                              const int64_t* recv_rows, size_t row_bytes, Group g) {
  // NCCL has no ragged all-to-all: grouped point-to-point, one send and one receive per peer.
  const int n = size(g);
  const char* s = static_cast<const char*>(send);
  char* r = static_cast<char*>(recv);
  NCCL_CHECK(ncclGroupStart());
  for (int peer = 0; peer < n; ++peer) {
    const size_t sb = size_t(send_rows[peer]) * row_bytes, rb = size_t(recv_rows[peer]) * row_bytes;
    if (sb) NCCL_CHECK(ncclSend(s, sb, ncclInt8, peer, comm(g), device_.stream()));
    if (rb) NCCL_CHECK(ncclRecv(r, rb, ncclInt8, peer, comm(g), device_.stream()));
    s += sb;
    r += rb;
  }
  NCCL_CHECK(ncclGroupEnd());
}

void NcclComm::alltoall_i32(const int32_t* send, int32_t* recv, int64_t per_rank, Group g) {
  const int n = size(g);
  NCCL_CHECK(ncclGroupStart());
  for (int peer = 0; peer < n; ++peer) {
    NCCL_CHECK(
        ncclSend(send + peer * per_rank, per_rank, ncclInt32, peer, comm(g), device_.stream()));
    NCCL_CHECK(
        ncclRecv(recv + peer * per_rank, per_rank, ncclInt32, peer, comm(g), device_.stream()));
  }
  NCCL_CHECK(ncclGroupEnd());
}

void NcclComm::allgather(const void* send, void* recv, size_t bytes_per_rank, Group g) {
  NCCL_CHECK(ncclAllGather(send, recv, bytes_per_rank, ncclInt8, comm(g), device_.stream()));
}

void NcclComm::reduce_scatter(const void* send, void* recv, size_t count_per_rank, DType dtype,
                              Group g) {
  const ncclDataType_t t = dtype == DType::kBf16 ? ncclBfloat16 : ncclFloat32;
  NCCL_CHECK(ncclReduceScatter(send, recv, count_per_rank, t, ncclSum, comm(g), device_.stream()));
}

void NcclComm::allreduce_f32(float* buf, size_t count, Group g) {
  NCCL_CHECK(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm(g), device_.stream()));
}

void NcclComm::wait(const char* what) {
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    cudaError_t st = cudaStreamQuery(device_.stream());
    if (st == cudaSuccess) return;
    if (st != cudaErrorNotReady) CUDA_CHECK(st);
    for (ncclComm_t c : {world_, ep_, fsdp_}) {
      ncclResult_t async = ncclSuccess;
      NCCL_CHECK(ncclCommGetAsyncError(c, &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        for (ncclComm_t a : {world_, ep_, fsdp_}) ncclCommAbort(a);
        world_ = ep_ = fsdp_ = nullptr;
        throw_error(
            __FILE__, __LINE__,
            std::string("NCCL error while waiting for ") + what + ": " + ncclGetErrorString(async));
      }
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s_) {
      for (ncclComm_t a : {world_, ep_, fsdp_}) ncclCommAbort(a);
      world_ = ep_ = fsdp_ = nullptr;
      throw_error(__FILE__, __LINE__,
                  std::string("timed out after ") + std::to_string(int(timeout_s_)) +
                      " s waiting for " + what +
                      ": a peer rank died or hangs (raise --timeout-s if the step is this slow)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace moe
