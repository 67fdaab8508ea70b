#include "app/dispatch_bench.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "app/calibrate.h"
#include "app/first_routing.h"
#include "core/bounded_wait.h"
#include "core/buffer_plan.h"
#include "core/error.h"
#include "core/grouped_gemm.h"
#include "core/init.h"
#include "core/placement.h"
#include "core/stats.h"
#include "dispatch/owned_buffers.h"

namespace moe {
namespace {

// The bench's timer phases: the layout and the four directions as the caller sees them, then the
// parts the dispatcher times itself (DispatchPhases).
enum BenchPhase : int {
  kBenchLayout,
  kBenchDir0,  // kNumDirs of them, in DispatchDirection order
  kBenchCounts = kBenchDir0 + kNumDirs,
  kBenchWire0,  // kNumDirs of them
  kNumBenchPhases = kBenchWire0 + kNumDirs
};

}  // namespace

int64_t equal_split_rows_per_peer(double bytes_to_others, int ep, size_t row_bytes) {
  MOE_CHECK(ep > 1 && row_bytes > 0,
            "equal_split_rows_per_peer: ep " << ep << ", row_bytes " << row_bytes);
  return std::max<int64_t>(1, std::llround(bytes_to_others / double(ep - 1) / double(row_bytes)));
}

DispatchBenchResult bench_dispatcher(const Workload& w, const Mesh& mesh, Device& device, Ops& ops,
                                     Comm& comm, MPI_Comm world, int warmup, int iters,
                                     double timeout_s) {
  MOE_CHECK(iters >= 1 && warmup >= 0, "bench_dispatcher: " << warmup << " + " << iters);
  const Dims d = step_dims(w, mesh);
  const int64_t T = d.T, H = d.H, E = d.E;
  const BufferPlan plan =
      plan_step_buffers(w, int64_t(device.storage_bytes()), int64_t(device.bytes_of(d.grad_dtype)));
  OwnedBuffers b(device);

  // The routing of the step's first step, as `run` routes it.
  const FirstRouting first = route_first_step(w, d, mesh.rank, plan, device, ops, b);
  void* x = first.x;
  int32_t* idx = first.idx;
  float* p = first.p;
  float* stats = first.stats;
  // This routing's rows per expert over the world: the grouped kernel's tile rows, and with
  // expert_placement the experts placed as `run` places them, each row's expert mapped to its
  // slot for the dispatcher.
  const int32_t* routed = idx;
  comm.allreduce_f32(stats, size_t(2 * E + 1), Group::kWorld);
  std::vector<float> counts(size_t(2 * E + 1));
  device.copy_to_host(counts.data(), stats, 4 * counts.size());
  GroupedTileRows tile_rows(w.capacity_factor == 0, mesh.fsdp);
  tile_rows.add(counts.data(), E);
  if (places_experts(w)) {
    const Placement placed = place_by_counts(w, counts.data()).placement;
    int32_t* slot_of = b.alloc<int32_t>(plan.expert_slots);
    device.copy_to_device(slot_of, placed.slot_of_expert.data(), 4 * size_t(E));
    int32_t* slots = b.alloc<int32_t>(plan.token_topk);
    ops.experts_to_slots(d, idx, slot_of, slots);
    routed = slots;
  }

  // What the directions read and write besides the expert-major rows.
  void* xq = d.dispatch_fp8 ? b.alloc(plan.token_rows_fp8) : nullptr;
  void* out = b.alloc(plan.token_rows);
  void* dout = b.alloc(plan.token_rows);
  device.fill_seeded(dout, dout_rule(w, mesh.rank, 0), 0, T * H);
  float* dp = b.alloc<float>(plan.token_topk);
  float* dx_acc = b.alloc<float>(plan.dx_acc);
  GrownBuffer xe(device), ye(device), dye(device);

  std::vector<std::string> names(kNumBenchPhases);
  names[kBenchLayout] = "layout";
  names[kBenchCounts] = "counts_exchange";
  for (int dir = 0; dir < kNumDirs; ++dir) {
    names[kBenchDir0 + dir] = direction_name(dir);
    names[kBenchWire0 + dir] = std::string("a2a_") + direction_name(dir);
  }
  std::unique_ptr<PhaseTimer> timer = device.make_timer(names);
  const DispatchPhases phases{kBenchCounts, kBenchWire0 + kDirDispatchFwd,
                              kBenchWire0 + kDirCombineFwd, kBenchWire0 + kDirCombineBwd,
                              kBenchWire0 + kDirDispatchBwd};
  std::unique_ptr<Dispatcher> dispatcher =
      make_dispatcher(w, mesh, d, device, ops, comm, *timer, phases);

  std::vector<std::vector<double>> samples(kNumBenchPhases);
  double sent[kNumDirs] = {}, rows_to_others = 0;
  for (int it = 0; it < warmup + iters; ++it) {
    device.sync();
    barrier_bounded(world, "the dispatch bench's barrier", timeout_s);
    timer->begin(kBenchLayout);
    dispatcher->layout(routed, p);
    timer->end(kBenchLayout);
    // The expert-major rows the layout asks for: a ragged size, grown (untimed on the host, and
    // in the warm-up once the routing is the same every iteration).
    const int64_t rows = dispatcher->rows_bound();
    void* xe_rows = xe.at_least(size_t(rows * plan.row_xe));
    void* ye_rows = ye.at_least(size_t(rows * plan.row_h));
    void* dye_rows = dye.at_least(size_t(rows * plan.row_h));

    timer->begin(kBenchDir0 + kDirDispatchFwd);
    if (xq) {  // dispatch_dtype fp8: the step packs x inside its dispatch phase too
      ops.pack_fp8_rows(d, x, T, xq);
      dispatcher->dispatch_fwd(xq, xe_rows);
    } else {
      dispatcher->dispatch_fwd(x, xe_rows);
    }
    timer->end(kBenchDir0 + kDirDispatchFwd);
    timer->begin(kBenchDir0 + kDirCombineFwd);
    dispatcher->combine_fwd(ye_rows, p, out);
    timer->end(kBenchDir0 + kDirCombineFwd);
    timer->begin(kBenchDir0 + kDirCombineBwd);
    dispatcher->combine_bwd(dout, p, dye_rows, dp);
    timer->end(kBenchDir0 + kDirCombineBwd);
    timer->begin(kBenchDir0 + kDirDispatchBwd);
    dispatcher->dispatch_bwd(dye_rows, dx_acc);
    timer->end(kBenchDir0 + kDirDispatchBwd);

    std::vector<double> ms = timer->read();
    allreduce_bounded(ms.data(), int(ms.size()), MPI_DOUBLE, MPI_MAX, world,
                      "the dispatch bench's times", timeout_s);
    const StepTraffic t = dispatcher->traffic();
    double mine[kNumDirs + 1];
    for (int dir = 0; dir < kNumDirs; ++dir) mine[dir] = t.bytes_to_others[dir];
    mine[kNumDirs] = double(t.rows_to_others);
    allreduce_bounded(mine, kNumDirs + 1, MPI_DOUBLE, MPI_MAX, world,
                      "the dispatch bench's traffic", timeout_s);
    if (it < warmup) continue;
    for (int ph = 0; ph < kNumBenchPhases; ++ph) samples[ph].push_back(ms[ph]);
    for (int dir = 0; dir < kNumDirs; ++dir) sent[dir] += mine[dir] / iters;
    rows_to_others += mine[kNumDirs] / iters;
  }
  dispatcher.reset();

  DispatchBenchResult r;
  r.dispatcher = name_of(w.dispatch);
  r.tokens = T;
  r.layout_ms = summarize(samples[kBenchLayout]).median;
  r.counts_ms = summarize(samples[kBenchCounts]).median;
  r.rows_per_token = rows_to_others / double(T);
  r.tile_rows_over_rows = tile_rows.over_rows();
  // The equal-split all-to-alls, one per distinct byte count (alltoall's four directions move
  // the same bytes).
  std::map<int64_t, double> alltoall_ms;
  std::map<size_t, double> copy_ms;
  const size_t row_bytes = size_t(H) * device.storage_bytes();
  for (int dir = 0; dir < kNumDirs; ++dir) {
    DispatchBenchDirection& o = r.dirs[dir];
    o.ms = summarize(samples[kBenchDir0 + dir]).median;
    o.wire_ms = summarize(samples[kBenchWire0 + dir]).median;
    o.bytes_to_others = sent[dir];
    if (mesh.ep == 1 || sent[dir] <= 0) continue;
    o.busbw_gbps = o.wire_ms > 0 ? sent[dir] / (o.wire_ms * 1e6) : 0;
    const int64_t rows = equal_split_rows_per_peer(sent[dir], mesh.ep, row_bytes);
    if (!alltoall_ms.count(rows))
      alltoall_ms[rows] = equal_split_alltoall_ms(device, comm, world, timeout_s, rows, row_bytes,
                                                  std::min(warmup, 3), iters);
    o.alltoall_ms = alltoall_ms[rows];
    o.alltoall_busbw_gbps =
        double(rows) * double(mesh.ep - 1) * double(row_bytes) / (o.alltoall_ms * 1e6);
    if (w.dispatch != DispatchKind::kNvlink) continue;
    const size_t per_peer = size_t(rows) * row_bytes;
    if (!copy_ms.count(per_peer))
      copy_ms[per_peer] =
          peer_copy_ms(device, comm, world, timeout_s, per_peer, std::min(warmup, 3), iters);
    o.peer_copy_ms = copy_ms[per_peer];
    o.peer_copy_gbps = double(per_peer) * double(mesh.ep - 1) / (o.peer_copy_ms * 1e6);
  }
  return r;
}

}  // namespace moe
