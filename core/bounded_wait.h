#pragma once
// Waits on MPI that never hang the job. Every blocking MPI call the step makes on the host goes
// through a non-blocking call and wait_bounded: a rank that waits longer than the run's bound
// (--timeout-s) for its peers, because one is stopped, livelocked or dead, says which rank waited
// in what and for how long, then aborts the whole job. (NcclComm bounds the GPU's waits the same
// way.) The step's orchestration, its check and the calibration use it for their MPI calls.
#include <mpi.h>

namespace moe {

// --timeout-s's default: longer than any step or check we run, short enough to free a job.
constexpr double kDefaultWaitBoundS = 300;

// Polls req until it completes; past timeout_s seconds prints "rank R: waited ... in WHAT" and
// calls MPI_Abort on MPI_COMM_WORLD (exit status 4), so no rank waits forever.
void wait_bounded(MPI_Request* req, const char* what, double timeout_s);

// Blocking collectives, bounded: in-place all-reduce, all-gather, barrier (which releases every
// rank within microseconds of the last arrival, as a blocking MPI_Barrier does).
void barrier_bounded(MPI_Comm comm, const char* what, double timeout_s);
void allreduce_bounded(void* buf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                       const char* what, double timeout_s);
void allgather_bounded(const void* send, void* recv, int count, MPI_Datatype type, MPI_Comm comm,
                       const char* what, double timeout_s);

}  // namespace moe
