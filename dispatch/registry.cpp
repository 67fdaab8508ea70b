// The dispatchers by name (the `dispatch` key): a new strategy adds its case to each function.
#include "core/dispatcher.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/saturating.h"
#include "dispatch/allgather.h"
#include "dispatch/alltoall.h"
#include "dispatch/alltoall_dedup.h"
#include "dispatch/nvlink.h"

namespace moe {

const char* direction_name(int dir) {
  static const char* const kNames[kNumDirs] = {"dispatch_fwd", "combine_fwd", "combine_bwd",
                                               "dispatch_bwd"};
  return dir >= 0 && dir < kNumDirs ? kNames[dir] : "?";
}

namespace {

// At ep 1 no row leaves the rank and every strategy reduces to one local permute and combine:
// alltoall's, whatever `dispatch` says (the other classes hold only their ep > 1 paths).
DispatchKind dispatch_at(const Workload& w, int64_t ep) {
  return ep == 1 ? DispatchKind::kAlltoall : w.dispatch;
}

}  // namespace

std::unique_ptr<Dispatcher> make_dispatcher(const Workload& w, const Mesh& mesh, const Dims& d,
                                            Device& device, Ops& ops, Comm& comm, PhaseTimer& timer,
                                            const DispatchPhases& phases) {
  switch (dispatch_at(w, d.ep)) {
    case DispatchKind::kAlltoall:
      return std::make_unique<AlltoallDispatcher>(d, mesh, device, ops, comm, timer, phases);
    case DispatchKind::kAllgather:
      return std::make_unique<AllgatherDispatcher>(d, mesh, device, ops, comm, timer, phases);
    case DispatchKind::kAlltoallDedup:
      return std::make_unique<AlltoallDedupDispatcher>(
          d, mesh, device, ops, comm, timer, phases,
          AlltoallDedupDispatcher::planned_received_rows(w));
    case DispatchKind::kNvlink:
      return std::make_unique<NvlinkDispatcher>(d, mesh, device, ops, comm, timer, phases);
  }
  MOE_CHECK(false, "no dispatcher for dispatch = " << name_of(w.dispatch));
  return nullptr;
}

size_t dispatch_row_bytes(int64_t H, bool dispatch_fp8, size_t storage_bytes) {
  return dispatch_fp8 ? size_t(fp8_row_bytes(H)) : storage_bytes * size_t(H);
}

size_t dispatch_row_bytes(const Workload& w, size_t storage_bytes) {
  return dispatch_row_bytes(w.model.hidden, w.dispatch_dtype == DispatchDtype::kFp8, storage_bytes);
}

DispatchBytes dispatch_bytes_for_rows(const Workload& w, const Mesh& mesh, size_t storage_bytes,
                                      double rows_per_rank) {
  switch (dispatch_at(w, mesh.ep)) {
    case DispatchKind::kAlltoall:
      return AlltoallDispatcher::bytes_for_rows(w, mesh, storage_bytes, rows_per_rank);
    case DispatchKind::kAllgather:
      return AllgatherDispatcher::bytes_for_rows(w, mesh, storage_bytes, rows_per_rank);
    case DispatchKind::kAlltoallDedup:
      return AlltoallDedupDispatcher::bytes_for_rows(w, mesh, storage_bytes, rows_per_rank);
    case DispatchKind::kNvlink:
      return NvlinkDispatcher::bytes_for_rows(w, mesh, storage_bytes, rows_per_rank);
  }
  return {};
}

int64_t dispatch_buffer_bytes(const Workload& w, int64_t storage_bytes) {
  switch (dispatch_at(w, w.mesh.ep)) {
    case DispatchKind::kAlltoall:
      return AlltoallDispatcher::buffer_bytes(w, storage_bytes);
    case DispatchKind::kAllgather:
      return AllgatherDispatcher::buffer_bytes(w, storage_bytes);
    case DispatchKind::kAlltoallDedup:
      return AlltoallDedupDispatcher::buffer_bytes(w, storage_bytes);
    case DispatchKind::kNvlink:
      return NvlinkDispatcher::buffer_bytes(w, storage_bytes);
  }
  return 0;
}

// One dispatcher per chunk of T / C tokens (overlap pipeline): C times what one chunk's moves and
// holds.
DispatchBytes step_dispatch_bytes(const Workload& w, const Mesh& mesh, size_t storage_bytes,
                                  double rows_per_rank) {
  const double C = double(step_chunks(w));
  DispatchBytes b =
      dispatch_bytes_for_rows(chunk_workload(w), mesh, storage_bytes, rows_per_rank / C);
  for (double& d : b.direction) d *= C;
  b.layout *= C;
  b.other *= C;
  b.collectives_per_step *= int(C);
  return b;
}

int64_t step_dispatch_buffer_bytes(const Workload& w, int64_t storage_bytes) {
  return saturating_product(
      {dispatch_buffer_bytes(chunk_workload(w), storage_bytes), step_chunks(w)});
}

}  // namespace moe
