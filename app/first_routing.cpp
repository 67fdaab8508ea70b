#include "app/first_routing.h"

#include "core/init.h"
#include "core/mesh.h"
#include "core/routing_modes.h"

namespace moe {

FirstRouting route_first_step(const Workload& w, const Dims& d, int rank, const BufferPlan& plan,
                              Device& device, Ops& ops, OwnedBuffers& b) {
  const int64_t T = d.T, H = d.H, E = d.E, K = d.K;
  FirstRouting r;
  r.x = b.alloc(plan.token_rows);
  device.fill_seeded(r.x, x_rule(w, rank, 0), 0, T * H);
  void* w_gate = b.alloc(plan.w_gate);
  device.fill_seeded(w_gate, w_gate_rule(w), 0, H * E);
  float* bias = nullptr;
  if (w.router.expert_bias) {
    std::vector<float> host(E);
    init_expert_bias(w, host.data());
    bias = b.alloc<float>(plan.expert_bias);
    device.copy_to_device(bias, host.data(), 4 * size_t(E));
  }
  int32_t* forced = nullptr;
  if (routing_is_forced(w)) {
    std::vector<int32_t> host(T * K);
    forced_routing(w, 0, int64_t(rank) * T, T, host.data());
    forced = b.alloc<int32_t>(plan.token_topk);
    device.copy_to_device(forced, host.data(), 4 * host.size());
  }
  float* logits = b.alloc<float>(plan.token_scores);
  float* scores = b.alloc<float>(plan.token_scores);
  r.idx = b.alloc<int32_t>(plan.token_topk);
  r.p = b.alloc<float>(plan.token_topk);
  r.stats = b.alloc<float>(plan.stats);
  ops.router_fwd(d, w.router, r.x, w_gate, bias, forced, logits, scores, r.idx, r.p, r.stats);
  return r;
}

std::vector<std::vector<float>> first_step_counts_by_source(const Workload& workload, int64_t ep,
                                                            Device& device, Ops& ops) {
  Workload w = workload;  // on a mesh of one EP group
  w.mesh.ep = ep;
  w.mesh.fsdp = 1;
  const Mesh mesh = make_mesh(int(ep), 0, ep, 1, w.model.experts);
  const Dims d = step_dims(w, mesh);
  const BufferPlan plan =
      plan_step_buffers(w, int64_t(device.storage_bytes()), int64_t(device.bytes_of(d.grad_dtype)));
  std::vector<std::vector<float>> counts(size_t(ep), std::vector<float>(size_t(d.E)));
  for (int64_t r = 0; r < ep; ++r) {
    OwnedBuffers b(device);
    const FirstRouting routed = route_first_step(w, d, int(r), plan, device, ops, b);
    device.copy_to_host(counts[size_t(r)].data(), routed.stats, 4 * size_t(d.E));
  }
  return counts;
}

}  // namespace moe
