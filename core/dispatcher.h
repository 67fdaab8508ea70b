#pragma once
// How routed token rows reach their experts and come back: the seam between the step
// (MoeLayer: router, experts, gradients) and a dispatch strategy (the `dispatch` key). One
// implementation per file under dispatch/, chosen by name in dispatch/registry.cpp; a new
// strategy touches only its file, the registry, the key's choices and its tests.
//
// The contract, per step: layout() once after the router, then the four directions in step order.
// Expert-major buffers belong to the caller (MoeLayer grows them to rows() after layout()); a
// dispatcher owns whatever else it moves rows through (send-order copies, landing buffers).
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/comm.h"
#include "core/device.h"
#include "core/mesh.h"
#include "core/ops.h"
#include "core/workload.h"

namespace moe {

// The four directions of a dispatch, each timed as its own a2a_* phase (DispatchPhases).
enum DispatchDirection {
  kDirDispatchFwd,
  kDirCombineFwd,
  kDirCombineBwd,
  kDirDispatchBwd,
  kNumDirs
};
// A direction's name as the report, the plan and the JSON spell it ("dispatch_fwd", ...; its
// collective's phase is "a2a_" and this). dispatch/registry.cpp.
const char* direction_name(int dir);

// What one step moved and routed, for bandwidth and routing statistics (this rank's view).
struct StepTraffic {
  // Bytes this rank sent to other EP ranks through each direction's timed collective.
  double bytes_to_others[kNumDirs] = {};
  // Rows of this rank's tokens that reached other EP ranks in the dispatch direction (all-to-all:
  // one per kept (t, k) routed elsewhere; all-gather: each token to every other rank).
  int64_t rows_to_others = 0;
  int64_t rows_received = 0;  // rows this rank's experts processed
  int64_t rows_dropped = 0;   // this rank's (t, k) over the capacity, not sent
  int64_t rows_padded = 0;    // zero rows added for align on this rank's experts
};

// Where a dispatcher times its parts of the step: the collectives inside layout and the four
// directions, each its own phase of the caller's timer, for bandwidth.
struct DispatchPhases {
  int counts_exchange = -1;
  int a2a_dispatch_fwd = -1, a2a_combine_fwd = -1, a2a_combine_bwd = -1, a2a_dispatch_bwd = -1;
};

// Bytes one rank moves through a dispatcher's collectives per step under balanced routing,
// dropless: what --dry-run predicts and the report's bandwidth columns divide by. Sizes as
// nccl-tests counts them (an all-to-all's send buffer, an all-gather's output, a reduce-scatter's
// input), of which (ep - 1) / ep cross to other ranks. At ep 1 only the layout's may run.
struct DispatchBytes {
  double direction[kNumDirs] = {};  // each direction's timed collective (its a2a_* phase)
  double layout = 0;                // the layout's exchange (counts_exchange)
  // Collectives outside those phases: the all-gather dispatcher's reduce-scatter of dp, which
  // follows the combine's backward.
  double other = 0;
  int collectives_per_step = 0;  // nvlink: its exchanges, each closed by a window barrier
  // Rows of one token that reach other ranks in the dispatch direction.
  double rows_per_token_to_others = 0;
  double per_step() const {
    double b = layout + other;
    for (double d : direction) b += d;
    return b;
  }
};

class Dispatcher {
 public:
  virtual ~Dispatcher() = default;
  virtual const char* name() const = 0;

  // After the router: decide each routed row's place (send_pos, capacity drops), exchange the
  // counts and plan the expert-major layout. idx [T, K] i32 and p [T, K] fp32 (backend memory).
  virtual void layout(const int32_t* idx, const float* p) = 0;
  // Where each local expert's rows sit in expert-major order, padding included (valid after
  // layout()): on the device always, on the host unless the step is sync-free (Dims::sync_free,
  // where rows_bound is the most any routing gives, else the rows themselves).
  virtual ExpertOffsets expert_offsets() const = 0;
  int64_t rows_bound() const { return expert_offsets().rows_bound; }
  // Where the expert-major rows come from (valid after layout()), on the device: each source
  // rank's rows per local expert and the offsets (ChunkRows::row_begin 0), for a pipelined step's
  // weight gradients, which gather every chunk's rows as the unchunked step orders them.
  virtual ChunkRows rows_by_source() const = 0;
  // [T * K] i32 (backend memory): each routed row's position, -1 where the capacity dropped it.
  virtual const int32_t* send_pos() const = 0;

  // x [T, H] storage -> xe [rows(), H] storage, expert-major (padding rows zero). With
  // Dims::dispatch_fp8 both hold packed FP8 rows instead, which every copy moves bit for bit.
  virtual void dispatch_fwd(const void* x, void* xe) = 0;
  // ye [rows(), H] -> out [T, H] = sum over each token's kept rows of p * y.
  virtual void combine_fwd(const void* ye, const float* p, void* out) = 0;
  // The adjoint of combine_fwd: dout [T, H] -> dye [rows(), H] and dp [T, K] fp32 (0 for dropped).
  virtual void combine_bwd(const void* dout, const float* p, void* dye, float* dp) = 0;
  // The adjoint of dispatch_fwd: dxe [rows(), H] -> dx_acc [T, H] fp32, the sum over each
  // token's rows. Touches nothing the weight-gradient GEMMs read, so it may run beside them.
  virtual void dispatch_bwd(const void* dxe, float* dx_acc) = 0;

  // This step's rows, after the step (the routing statistics are the caller's). After a
  // sync-free step this is where the counts come to the host, outside the step's time.
  virtual StepTraffic traffic() = 0;
};

// Bytes of one row that dispatch_fwd moves: H storage elements, or with dispatch_dtype fp8 one
// packed FP8 row (core/fp8.h fp8_row_bytes). The other three directions move storage rows.
// dispatch/registry.cpp.
size_t dispatch_row_bytes(int64_t H, bool dispatch_fp8, size_t storage_bytes);
size_t dispatch_row_bytes(const Workload& w, size_t storage_bytes);

// The dispatcher the workload names (w.dispatch), over the backend's device, ops and comm, timing
// its parts as `phases` of `timer`. dispatch/registry.cpp.
std::unique_ptr<Dispatcher> make_dispatcher(const Workload& w, const Mesh& mesh, const Dims& d,
                                            Device& device, Ops& ops, Comm& comm, PhaseTimer& timer,
                                            const DispatchPhases& phases);

// Bytes per rank the workload's dispatcher moves when each rank routes rows_per_rank rows (T * K
// dropless; fewer where the capacity drops some), storage_bytes per element: the cost model's
// and --dry-run's figure. dispatch/registry.cpp.
DispatchBytes dispatch_bytes_for_rows(const Workload& w, const Mesh& mesh, size_t storage_bytes,
                                      double rows_per_rank);
// Bytes of memory per rank the dispatcher holds beyond the caller's expert-major buffers, for the
// memory estimate: a resolved workload (mesh set), balanced routing, storage_bytes per element.
int64_t dispatch_buffer_bytes(const Workload& w, int64_t storage_bytes);
// The same for a whole step, which runs one dispatcher per chunk of its tokens (step_chunks(w),
// overlap pipeline; one otherwise): the bytes and buffers of them all.
DispatchBytes step_dispatch_bytes(const Workload& w, const Mesh& mesh, size_t storage_bytes,
                                  double rows_per_rank);
int64_t step_dispatch_buffer_bytes(const Workload& w, int64_t storage_bytes);

}  // namespace moe
