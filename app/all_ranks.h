#pragma once
// Start-up checks that every rank must pass or fail together: bad input is found on every rank
// (each checks what it sees), and no rank may go on into a collective that a rank which gave up
// will never join.
#include <mpi.h>
#include <spdlog/spdlog.h>

#include <string>

#include "core/bounded_wait.h"
#include "core/error.h"

namespace moe {

// Runs fn on every rank. If it throws a UserError on any rank, the lowest failing rank prints its
// message (once for the whole world) and every rank returns false, so nobody waits on a rank that
// gave up.
template <class Fn>
bool on_all_ranks(MPI_Comm world, double timeout_s, Fn fn) {
  std::string msg;
  try {
    fn();
  } catch (const UserError& e) {
    msg = e.what();
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  int first_failed = msg.empty() ? size : rank;
  allreduce_bounded(&first_failed, 1, MPI_INT, MPI_MIN, world, "the start-up checks", timeout_s);
  if (first_failed == size) return true;
  if (rank == first_failed) spdlog::error("{}", msg);
  return false;
}

}  // namespace moe
