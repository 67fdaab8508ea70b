#pragma once
// `moebench dispatch`'s measurement: one dispatcher alone over a rank's T tokens, as the step
// runs it (its layout, then its four directions on the rows the seeded gate routes in the first
// step), each part timed on the backend's clock; and, for each direction, the EP group's
// all-to-all of equal splits that sends the same bytes to the other ranks, the collective a
// dispatcher is set against (NCCL's on the CUDA backend, MPI's on the CPU one).
#include <mpi.h>

#include <cstdint>
#include <string>

#include "comm/comm.h"
#include "core/device.h"
#include "core/dispatcher.h"
#include "core/mesh.h"
#include "core/ops.h"
#include "core/workload.h"

namespace moe {

// One direction of a dispatcher (DispatchDirection), per rank: medians over iterations of the
// slowest rank's time.
struct DispatchBenchDirection {
  double ms = 0;       // the whole call: permutes, regroups, sums and the collective
  double wire_ms = 0;  // its collective alone (the step's a2a_* phase)
  // Bytes this rank sent to other EP ranks (the most of any rank), and what that is per second of
  // the collective: nccl-tests' bus bandwidth of an all-to-all, whose bytes to other ranks are
  // its send buffer times (ep - 1) / ep. 0 where ep is 1 (nothing crosses a wire).
  double bytes_to_others = 0;
  double busbw_gbps = 0;
  // The equal-split all-to-all with the same bytes to others: its median ms and bus bandwidth.
  double alltoall_ms = 0;
  double alltoall_busbw_gbps = 0;
  // dispatch nvlink only (0 elsewhere): plain copies of the same bytes into the other ranks'
  // memory by the copy engines (peer_copy_ms), the bandwidth its row moves are set against.
  double peer_copy_ms = 0;
  double peer_copy_gbps = 0;
};

struct DispatchBenchResult {
  std::string dispatcher;
  int64_t tokens = 0;         // per rank
  double layout_ms = 0;       // layout(), its counts exchange included
  double counts_ms = 0;       // the counts exchange alone
  double rows_per_token = 0;  // rows of a token that reached other ranks (dispatch direction)
  // The rows the grouped kernel's row GEMMs would multiply for this routing (each expert's rows at
  // its rank rounded up to whole kGroupedTileRows tiles) over the rows routed.
  double tile_rows_over_rows = 0;
  DispatchBenchDirection dirs[kNumDirs];
};

// Runs w's dispatcher (w.dispatch, over w.tokens_per_rank tokens, every other key as the step
// takes it, the pipeline's chunking aside) for `warmup` untimed and `iters` timed iterations.
// Collective over world; every rank gets the same result.
DispatchBenchResult bench_dispatcher(const Workload& w, const Mesh& mesh, Device& device, Ops& ops,
                                     Comm& comm, MPI_Comm world, int warmup, int iters,
                                     double timeout_s);

// Rows of row_bytes to every other EP rank that carry `bytes_to_others` bytes to the ep - 1 other
// ranks in an equal-split all-to-all (rounded to the nearest, at least 1).
int64_t equal_split_rows_per_peer(double bytes_to_others, int ep, size_t row_bytes);

}  // namespace moe
