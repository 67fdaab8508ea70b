#include "comm/mpi_comm.h"

#include <limits>
#include <vector>

#include "comm/mpi_window.h"
#include "core/bf16.h"
#include "core/bounded_wait.h"
#include "core/error.h"

namespace moe {
namespace {

// MPI counts are int: a larger message would need a derived type per chunk. The CPU backend is
// for shapes far below that, so say so instead of overflowing.
void check_int_count(size_t n, const char* what) {
  MOE_USER_CHECK(n <= size_t(std::numeric_limits<int>::max()),
                 what << " of " << n
                      << " elements is too large for one MPI message on the CPU "
                         "backend: raise mesh.fsdp or mesh.ep, or shrink the model");
}

}  // namespace

const char* group_name(Group g) {
  switch (g) {
    case Group::kWorld:
      return "world";
    case Group::kEp:
      return "ep";
    case Group::kFsdp:
      return "fsdp";
  }
  return "?";
}

// "the rows' all-to-all of the ep group", for a wait that timed out.
std::string MpiComm::what(const char* collective, Group g) const {
  return std::string(collective) + " of the " + group_name(g) + " group";
}

MpiComm::MpiComm(MPI_Comm world, const Mesh& mesh, double timeout_s)
    : world_(world), timeout_s_(timeout_s) {
  MPI_CHECK(MPI_Comm_split(world, mesh.fsdp_rank, mesh.ep_rank, &ep_));
  MPI_CHECK(MPI_Comm_split(world, mesh.ep_rank, mesh.fsdp_rank, &fsdp_));
}

MpiComm::~MpiComm() {
  MPI_Comm_free(&ep_);
  MPI_Comm_free(&fsdp_);
}

MPI_Comm MpiComm::comm(Group g) const {
  return g == Group::kWorld ? world_ : g == Group::kEp ? ep_ : fsdp_;
}

int MpiComm::rank(Group g) const {
  int r = 0;
  MPI_CHECK(MPI_Comm_rank(comm(g), &r));
  return r;
}

int MpiComm::size(Group g) const {
  int s = 0;
  MPI_CHECK(MPI_Comm_size(comm(g), &s));
  return s;
}

void MpiComm::alltoallv_rows(const void* send, const int64_t* send_rows, void* recv,
                             const int64_t* recv_rows, size_t row_bytes, Group g) {
  // Counts in rows of a contiguous row type keep MPI's int counts far from overflow.
  const int n = size(g);
  std::vector<int> sc(n), sd(n), rc(n), rd(n);
  int64_t so = 0, ro = 0;
  for (int r = 0; r < n; ++r) {
    MOE_CHECK(so <= std::numeric_limits<int>::max() && ro <= std::numeric_limits<int>::max(),
              "all-to-all row offsets exceed int range");
    sc[r] = int(send_rows[r]);
    sd[r] = int(so);
    rc[r] = int(recv_rows[r]);
    rd[r] = int(ro);
    so += send_rows[r];
    ro += recv_rows[r];
  }
  check_int_count(row_bytes, "an all-to-all row");
  MPI_Datatype row;
  MPI_CHECK(MPI_Type_contiguous(int(row_bytes), MPI_BYTE, &row));
  MPI_CHECK(MPI_Type_commit(&row));
  MPI_Request req;
  MPI_CHECK(MPI_Ialltoallv(send, sc.data(), sd.data(), row, recv, rc.data(), rd.data(), row,
                           comm(g), &req));
  wait_bounded(&req, what("the rows' all-to-all", g).c_str(), timeout_s_);
  MPI_CHECK(MPI_Type_free(&row));
}

void MpiComm::alltoall_i32(const int32_t* send, int32_t* recv, int64_t per_rank, Group g) {
  MPI_Request req;
  MPI_CHECK(MPI_Ialltoall(send, int(per_rank), MPI_INT32_T, recv, int(per_rank), MPI_INT32_T,
                          comm(g), &req));
  wait_bounded(&req, what("the counts' all-to-all", g).c_str(), timeout_s_);
}

void MpiComm::allgather(const void* send, void* recv, size_t bytes_per_rank, Group g) {
  check_int_count(bytes_per_rank, "an all-gather");
  MPI_Datatype chunk;
  MPI_CHECK(MPI_Type_contiguous(int(bytes_per_rank), MPI_BYTE, &chunk));
  MPI_CHECK(MPI_Type_commit(&chunk));
  MPI_Request req;
  MPI_CHECK(MPI_Iallgather(send, 1, chunk, recv, 1, chunk, comm(g), &req));
  wait_bounded(&req, what("an all-gather", g).c_str(), timeout_s_);
  MPI_CHECK(MPI_Type_free(&chunk));
}

void MpiComm::reduce_scatter(const void* send, void* recv, size_t count_per_rank, DType dtype,
                             Group g) {
  check_int_count(count_per_rank, "a reduce-scatter");
  MPI_Request req;
  MPI_CHECK(MPI_Ireduce_scatter_block(send, recv, int(count_per_rank), MPI_FLOAT, MPI_SUM, comm(g),
                                      &req));
  wait_bounded(&req, what("a reduce-scatter", g).c_str(), timeout_s_);
  if (dtype == DType::kBf16) {
    float* r = static_cast<float*>(recv);
    for (size_t i = 0; i < count_per_rank; ++i) r[i] = round_to_bf16(r[i]);
  }
}

void MpiComm::allreduce_f32(float* buf, size_t count, Group g) {
  check_int_count(count, "an all-reduce");
  allreduce_bounded(buf, int(count), MPI_FLOAT, MPI_SUM, comm(g), what("an all-reduce", g).c_str(),
                    timeout_s_);
}

std::unique_ptr<PeerWindow> MpiComm::open_window(size_t bytes, Group g) {
  return std::make_unique<MpiWindow>(comm(g), bytes, timeout_s_);
}

}  // namespace moe
