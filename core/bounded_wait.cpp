#include "core/bounded_wait.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "core/error.h"

namespace moe {

void wait_bounded(MPI_Request* req, const char* what, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto pause = std::chrono::microseconds(0);
  for (;;) {
    int done = 0;
    MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited > timeout_s) {
      int rank = -1;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      spdlog::error(
          "rank {}: waited {:.0f} s in {} for the other ranks, longer than --timeout-s {:g}: a "
          "rank is stopped, stuck or dead; aborting the job (raise --timeout-s if a step is "
          "this slow)",
          rank, waited, what, timeout_s);
      spdlog::default_logger()->flush();
      MPI_Abort(MPI_COMM_WORLD, 4);
    }
    // The first millisecond is polled without sleeping (yielding the core to ranks that share
    // it): the barrier before each step must release every rank at once, or the skew shows up
    // as time in the step's first collective (measured: +0.04 ms in Mixtral's router_fwd on 2
    // H200s with sleeps from the start). Longer waits back off to a poll every 200 us.
    if (waited < 1e-3) {
      std::this_thread::yield();
      continue;
    }
    pause =
        std::max(std::chrono::microseconds(1), std::min(pause * 2, std::chrono::microseconds(200)));
    std::this_thread::sleep_for(pause);
  }
}

void barrier_bounded(MPI_Comm comm, const char* what, double timeout_s) {
  // Twice: the first gathers ranks that arrive far apart (a long wait, polled with sleeps, so its
  // release can lag by one poll); the second, entered within that lag, is polled without
  // sleeping and releases every rank together.
  for (int round = 0; round < 2; ++round) {
    MPI_Request req;
    MPI_CHECK(MPI_Ibarrier(comm, &req));
    wait_bounded(&req, what, timeout_s);
  }
}

void allreduce_bounded(void* buf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                       const char* what, double timeout_s) {
  MPI_Request req;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, count, type, op, comm, &req));
  wait_bounded(&req, what, timeout_s);
}

void allgather_bounded(const void* send, void* recv, int count, MPI_Datatype type, MPI_Comm comm,
                       const char* what, double timeout_s) {
  MPI_Request req;
  MPI_CHECK(MPI_Iallgather(send, count, type, recv, count, type, comm, &req));
  wait_bounded(&req, what, timeout_s);
}

}  // namespace moe
