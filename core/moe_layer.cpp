#include "core/moe_layer.h"

#include <algorithm>
#include <chrono>

#include "core/buffer_plan.h"
#include "core/error.h"
#include "core/fp8_scales.h"
#include "core/init.h"
#include "core/router_losses.h"
#include "core/routing_modes.h"

namespace moe {

const char* phase_name(int phase) {
  static const char* const kNames[kNumPhases] = {"fsdp_gather",
                                                 "router_fwd",
                                                 "layout",
                                                 "shared_fwd",
                                                 "dispatch_fwd",
                                                 "experts_fwd",
                                                 "combine_fwd",
                                                 "combine_bwd",
                                                 "experts_bwd",
                                                 "shared_bwd",
                                                 "dispatch_bwd",
                                                 "router_bwd",
                                                 "grad_sync",
                                                 "counts_exchange",
                                                 "a2a_dispatch_fwd",
                                                 "a2a_combine_fwd",
                                                 "a2a_combine_bwd",
                                                 "a2a_dispatch_bwd",
                                                 "step"};
  return (phase >= 0 && phase < kNumPhases) ? kNames[phase] : "?";
}

MoeLayer::MoeLayer(const Workload& w, const Mesh& mesh, Device& device, Ops& ops, Comm& comm)
    : w_(w), mesh_(mesh), device_(device), ops_(ops), comm_(comm) {
  d_ = step_dims(w, mesh);
  const int64_t H = d_.H, E = d_.E, El = d_.E_local;
  std::vector<std::string> names;
  for (int p = 0; p < kNumPhases; ++p) names.push_back(phase_name(p));
  timer_ = device.make_timer(names);
  plan_ = plan_step_buffers(w, int64_t(device.storage_bytes()),
                            int64_t(device.bytes_of(d_.grad_dtype)));
  const BufferPlan& b = plan_;

  shard_in_ = b.shard_in_elems;
  shard_out_ = b.shard_out_elems;
  w_gate_ = fixed(b.w_gate);
  w_in_shard_ = fixed(b.w_in_shard);
  w_out_shard_ = fixed(b.w_out_shard);
  dw_gate_ = static_cast<float*>(fixed(b.dw_gate));
  dw_in_full_ = fixed(b.dw_in_full);
  dw_out_full_ = fixed(b.dw_out_full);
  if (d_.fsdp > 1) {
    w_in_full_ = fixed(b.w_in_full);
    w_out_full_ = fixed(b.w_out_full);
    dw_in_shard_ = fixed(b.dw_in_shard);
    dw_out_shard_ = fixed(b.dw_out_shard);
  } else {
    // Without FSDP the shard is the whole tensor: no gather, no scatter, half the memory.
    w_in_full_ = w_in_shard_;
    w_out_full_ = w_out_shard_;
    dw_in_shard_ = dw_in_full_;
    dw_out_shard_ = dw_out_full_;
  }

  // The weights are generated where they live (on the GPU, from the seed), each global element
  // from its global index, so that they do not depend on the mesh.
  device.fill_seeded(w_gate_, w_gate_rule(w), 0, H * E);
  if (w.router.expert_bias) {
    expert_bias_ = static_cast<float*>(fixed(b.expert_bias));
    std::vector<float> bias(E);
    init_expert_bias(w, bias.data());
    device.copy_to_device(expert_bias_, bias.data(), 4 * E);
  }
  if (w.model.shared_experts > 0)
    shared_ = std::make_unique<SharedExperts>(w, mesh, d_, b.shared, device, ops, comm);

  x_ = fixed(b.token_rows);
  if (d_.dispatch_fp8) xq_ = fixed(b.token_rows_fp8);
  dout_ = fixed(b.token_rows);
  out_ = fixed(b.token_rows);
  dx_ = fixed(b.token_rows);
  dx_acc_ = static_cast<float*>(fixed(b.dx_acc));
  logits_ = static_cast<float*>(fixed(b.token_scores));
  scores_ = static_cast<float*>(fixed(b.token_scores));
  dlogits_ = static_cast<float*>(fixed(b.token_scores));
  idx_ = static_cast<int32_t*>(fixed(b.token_topk));
  if (routing_is_forced(w)) forced_idx_ = static_cast<int32_t*>(fixed(b.token_topk));
  p_ = static_cast<float*>(fixed(b.token_topk));
  dp_ = static_cast<float*>(fixed(b.token_topk));
  stats_ = static_cast<float*>(fixed(b.stats));
  stats_host_.resize(2 * E + 1);
  if (b.fp8_scales) fp8_scales_ = static_cast<float*>(fixed(b.fp8_scales));

  place_experts_by_first_step();
  // This rank's FSDP shard of its slots' flattened weights, each slot's from its expert's global
  // indices; padding past the last slot stays zero (the buffer is allocated zero-filled).
  auto load_shard = [&](int64_t per_expert, int64_t shard, const InitRule& rule, void* dst) {
    const size_t sb = device.storage_bytes();
    const int64_t begin = std::min(El * per_expert, mesh.fsdp_rank * shard);
    const int64_t end = std::min(El * per_expert, begin + shard);
    for (int64_t slot = begin / per_expert; slot * per_expert < end; ++slot) {
      const int64_t from = std::max(begin, slot * per_expert);
      const int64_t to = std::min(end, (slot + 1) * per_expert);
      const int64_t expert = local_experts_[size_t(slot)];
      device.fill_seeded(static_cast<char*>(dst) + sb * size_t(from - begin), rule,
                         expert * per_expert + (from - slot * per_expert), to - from);
    }
  };
  load_shard(H * 2 * d_.F, shard_in_, w_in_rule(w), w_in_shard_);
  load_shard(d_.F * H, shard_out_, w_out_rule(w), w_out_shard_);

  // Each chunk's dispatcher sees only its chunk: T / C tokens, the capacity per chunk.
  const DispatchPhases phases{kCountsExchange, kA2aDispatchFwd, kA2aCombineFwd, kA2aCombineBwd,
                              kA2aDispatchBwd};
  const Workload one = chunk_workload(w);
  Dims chunk = d_;
  chunk.T = one.tokens_per_rank;
  chunk.N = chunk.T * mesh.world;
  pipelined_ = w.overlap == Overlap::kPipeline;
  merged_ = step_chunks(w) > 1;
  if (merged_) {
    merged_offsets_ = static_cast<int64_t*>(fixed(b.merged_offsets));
    merged_blocks_ = static_cast<int64_t*>(fixed(b.merged_blocks));
    merged_offsets_host_.assign(El + 1, 0);
  }
  for (int64_t c = 0; c < step_chunks(w); ++c) {
    Chunk& ch = chunks_.emplace_back();
    ch.index = c;
    ch.token_begin = c * chunk.T;
    ch.tokens = chunk.T;
    ch.dispatcher = make_dispatcher(one, mesh, chunk, device, ops, comm, *timer_, phases);
  }
  // Size the ragged buffers for balanced routing up front (skew grows them once, in warm-up), or
  // for the most rows any routing gives in a sync-free step, which never grows them.
  grow_expert_buffers_for(b.planned_rows);
}

MoeLayer::~MoeLayer() {
  device_.release_graph();
  chunks_.clear();
  shared_.reset();
  for (void* p : owned_) device_.release(p);
}

void* MoeLayer::fixed(size_t bytes) {
  void* p = device_.alloc(std::max<size_t>(bytes, 1));
  owned_.push_back(p);
  return p;
}

void* MoeLayer::grow(GrownBuffer& b, size_t bytes) {
  return b.at_least(bytes, size_t(plan_.ragged_buffer_bytes(int64_t(bytes))));
}

void MoeLayer::grow_expert_buffers_for(int64_t rows) {
  grow(xe_, size_t(rows * plan_.row_xe));
  if (merged_) grow(xw_, size_t(rows * plan_.row_xe));
  for (GrownBuffer* b : {&ye_, &dye_, &dxe_}) grow(*b, size_t(rows * plan_.row_h));
  for (GrownBuffer* b : {&h_, &dh_}) grow(*b, size_t(rows * plan_.row_2f));
  for (GrownBuffer* b : {&a_, &da_}) grow(*b, size_t(rows * plan_.row_f));
}

// Balanced placement deals the experts out by the rows the first step's routing gives them over
// the world (every rank computes the same placement from the same all-reduced counts), as EPLB
// places by the loads of past steps; routing does not depend on where the experts are.
void MoeLayer::place_experts_by_first_step() {
  const int64_t El = d_.E_local;
  placed_.placement = contiguous_placement(d_.E);
  if (places_experts(w_)) {
    load_step_inputs(0);
    route();
    device_.copy_to_host(stats_host_.data(), stats_, 4 * stats_host_.size());
    placed_ = place_by_counts(w_, stats_host_.data());
    slot_of_expert_ = static_cast<int32_t*>(fixed(plan_.expert_slots));
    device_.copy_to_device(slot_of_expert_, placed_.placement.slot_of_expert.data(),
                           4 * size_t(d_.E));
    slot_idx_ = static_cast<int32_t*>(fixed(plan_.token_topk));
  }
  const auto first = placed_.placement.expert_of_slot.begin() + mesh_.ep_rank * El;
  local_experts_.assign(first, first + El);
}

int64_t MoeLayer::local_slot(int64_t expert) const {
  const int64_t g = placed_.placement.slot_of_expert.at(size_t(expert));
  MOE_CHECK(g / d_.E_local == mesh_.ep_rank,
            "expert " << expert << " is in slot " << g << ", not on EP rank " << mesh_.ep_rank);
  return g % d_.E_local;
}

void MoeLayer::load_step_inputs(int64_t step) {
  const int64_t n = d_.T * d_.H;
  device_.fill_seeded(x_, x_rule(w_, mesh_.rank, step), 0, n);
  device_.fill_seeded(dout_, dout_rule(w_, mesh_.rank, step), 0, n);
  if (forced_idx_) {
    std::vector<int32_t> idx(d_.T * d_.K);
    forced_routing(w_, step, int64_t(mesh_.rank) * d_.T, d_.T, idx.data());
    device_.copy_to_device(forced_idx_, idx.data(), 4 * idx.size());
  }
}

void MoeLayer::run_step(std::vector<double>& phase_ms) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t waits = device_.host_waits();
  if (replaying_) {
    device_.replay();
    timer_->replayed();
  } else if (capture_next_ && device_.captures()) {
    device_.begin_capture();
    issue_step();
    device_.end_capture();
    device_.replay();
    replaying_ = true;
  } else {
    issue_step();
  }
  capture_next_ = false;
  host_issue_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  host_waits_ = device_.host_waits() - waits;

  phase_ms = timer_->read();
  lanes_ = lane_times(timer_->intervals(), kNumStepPhases,
                      {kA2aDispatchFwd, kA2aCombineFwd, kA2aCombineBwd, kA2aDispatchBwd});
  // Routing statistics for the report (after timing: this waits for the step).
  device_.copy_to_host(stats_host_.data(), stats_, 4 * stats_host_.size());
  global_expert_counts_.assign(stats_host_.begin(), stats_host_.begin() + d_.E);
}

void MoeLayer::issue_step() {
  PhaseTimer& t = *timer_;
  t.begin(kStep);

  // ---- forward ----
  t.begin(kFsdpGather);
  fsdp_gather();
  t.end(kFsdpGather);

  t.begin(kRouterFwd);
  route();
  t.end(kRouterFwd);

  t.begin(kLayout);
  layout();
  t.end(kLayout);

  // Counted with the experts' forward: in FP8, the weights' quantization, once for the step, or
  // with fp8_weights cached once for the run (the weights change only where an optimizer would
  // step, which this benchmark never does).
  quantize_weights_ = w_.fp8_weights == Fp8Weights::kPerStep || !weights_quantized_;
  if (quantize_weights_) {
    t.begin(kExpertsFwd);
    ops_.prepare_expert_weights(d_, d_.E_local, w_in_full_, w_out_full_);
    t.end(kExpertsFwd);
    weights_quantized_ = true;  // the shared experts' in this step's shared_fwd
  }

  forward();  // dispatch, experts, combine: chunk by chunk

  // ---- backward: the adjoint of each forward phase, in reverse ----
  backward();  // combine_bwd, experts_bwd, dispatch_bwd: chunk by chunk

  t.begin(kRouterBwd);
  // The end of dx: the shared experts' part joins the routed part dispatch_bwd wrote.
  if (shared_) shared_->add_to_dx(dx_acc_);
  ops_.router_bwd(d_, w_.router, x_, w_gate_, logits_, scores_, idx_, dp_, stats_, dlogits_,
                  dx_acc_, dx_, dw_gate_);
  t.end(kRouterBwd);

  t.begin(kGradSync);
  grad_sync();
  t.end(kGradSync);

  t.end(kStep);
}

double MoeLayer::time_weight_quantization(int reps) {
  MOE_CHECK(weights_quantized_, "time_weight_quantization before any step gathered the weights");
  if (!ops_.prepares_expert_weights(d_)) return -1;
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    device_.sync();
    const auto start = std::chrono::steady_clock::now();
    ops_.prepare_expert_weights(d_, d_.E_local, w_in_full_, w_out_full_);
    if (shared_) shared_->quantize_weights();
    device_.sync();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms.empty() ? 0.0 : ms[ms.size() / 2];
}

// Every chunk's layout before any dispatch: each waits on the host for its counts, which would
// stall the pipeline between two chunks' GEMMs. A sync-free step's chunks sit at their bounds,
// where the buffers sized at construction already hold them.
void MoeLayer::layout() {
  int64_t rows = 0;
  for (Chunk& c : chunks_) {
    // The dispatchers see slots: expert e's rows go to the EP rank that holds it.
    c.dispatcher->layout(tokens_of(slot_idx_ ? slot_idx_ : idx_, c, d_.K), tokens_of(p_, c, d_.K));
    c.row_begin = c.index == 0 ? 0 : chunk_rows_begin(rows);
    rows = c.row_begin + c.dispatcher->rows_bound();
  }
  if (!d_.sync_free)
    grow_expert_buffers_for(rows);
  else
    MOE_CHECK(size_t(rows * plan_.row_h) <= ye_.bytes(),
              "sync-free step: " << rows << " rows past the buffers sized at construction");
  if (merged_) merge_chunks(rows);
}

// Each local expert's rows of all chunks in one block, by source rank, then chunk, then token,
// padded once: the unchunked step's order, so that the weight-gradient GEMMs (an FP8 operand's
// scales and 128-row blocks among them) are the unchunked step's. It fits in the chunks' rows.
void MoeLayer::merge_chunks(int64_t rows_bound) {
  std::vector<ChunkRows> chunks;
  for (const Chunk& c : chunks_) {
    chunks.push_back(c.dispatcher->rows_by_source());
    chunks.back().row_begin = c.row_begin;
  }
  ops_.merge_chunk_layout(d_, chunks, merged_offsets_, merged_blocks_);
  merged_rows_bound_ = rows_bound;
  if (!d_.sync_free)
    device_.copy_to_host(merged_offsets_host_.data(), merged_offsets_,
                         8 * merged_offsets_host_.size());
}

ExpertOffsets MoeLayer::merged_offsets() const {
  if (d_.sync_free) return {merged_offsets_, nullptr, merged_rows_bound_};
  return {merged_offsets_, merged_offsets_host_.data(), merged_offsets_host_[d_.E_local]};
}

void MoeLayer::forward() {
  if (pipelined_) {
    // Chunk c's expert GEMMs beside chunk c + 1's dispatch and chunk c - 1's combine; the shared
    // experts, which need only x, beside the first dispatch.
    pipeline({&MoeLayer::dispatch_fwd, &MoeLayer::experts_fwd, &MoeLayer::combine_fwd,
              shared_ ? &MoeLayer::shared_fwd : nullptr, nullptr});
  } else {
    // One chunk; with an overlap the shared experts run beside the dispatch, and the routed
    // experts start once both are done.
    const Chunk& all = chunks_.front();
    const bool shared_beside = shared_ && w_.overlap != Overlap::kNone;
    if (shared_beside)
      on_side([&] { shared_fwd(); });
    else if (shared_)
      shared_fwd();
    dispatch_fwd(all);
    if (shared_beside) device_.join_side();
    experts_fwd(all);
    combine_fwd(all);
  }
  if (shared_) {
    timer_->begin(kCombineFwd);
    shared_->add_to_out(out_);
    timer_->end(kCombineFwd);
  }
}

void MoeLayer::backward() {
  if (pipelined_) {
    // Chunk c's data gradients beside chunk c - 1's dispatch_bwd and chunk c + 1's combine_bwd;
    // the weight gradients of all chunks, then the shared experts' backward, beside the last
    // dispatch_bwd.
    pipeline({&MoeLayer::combine_bwd, &MoeLayer::experts_bwd_data, &MoeLayer::dispatch_bwd, nullptr,
              &MoeLayer::experts_bwd_weights_and_shared});
    return;
  }
  // One chunk; with overlap dispatch_bwd, dispatch_bwd beside the weight gradients (which it does
  // not touch) and the shared experts' backward.
  const Chunk& all = chunks_.front();
  combine_bwd(all);
  experts_bwd_data(all);
  const bool beside = w_.overlap == Overlap::kDispatchBwd;
  if (beside) on_side([&] { dispatch_bwd(all); });
  experts_bwd_weights();
  if (shared_) shared_bwd();
  if (beside)
    device_.join_side();
  else
    dispatch_bwd(all);
}

// The device's lanes wait for each other whole (Device::join_side), so the side lane feeds one
// chunk ahead: work(c) waits for feed(c) only because feed(c + 1) is issued after that wait.
// Every dispatcher direction, and so every collective of the chunks, runs on the side lane in
// issue order; every expert GEMM on the main lane, which keeps the GEMMs' workspaces unshared.
void MoeLayer::pipeline(const Pipeline& p) {
  const size_t C = chunks_.size();
  on_side([&] { (this->*p.feed)(chunks_[0]); });
  if (p.at_start) (this->*p.at_start)();
  device_.join_side();
  if (C > 1) on_side([&] { (this->*p.feed)(chunks_[1]); });
  for (size_t c = 0; c < C; ++c) {
    (this->*p.work)(chunks_[c]);
    device_.join_side();  // feed(c + 1), for work(c + 1)
    on_side([&] {
      (this->*p.drain)(chunks_[c]);
      if (c + 2 < C) (this->*p.feed)(chunks_[c + 2]);
    });
  }
  if (p.at_end) (this->*p.at_end)();
  device_.join_side();
}

// With dispatch_dtype fp8 each token's row is quantized once, here, and travels packed to the
// experts (xe holds the packed rows then), whose up projection takes it as it is.
void MoeLayer::dispatch_fwd(const Chunk& c) {
  timer_->begin(kDispatchFwd);
  const void* x = tokens_of(x_, c, d_.H, device_.storage_bytes());
  if (d_.dispatch_fp8) {
    void* xq = tokens_of(xq_, c, plan_.row_xe, 1);
    ops_.pack_fp8_rows(d_, x, c.tokens, xq);
    c.dispatcher->dispatch_fwd(xq, rows_of(xe_, c, plan_.row_xe));
  } else {
    c.dispatcher->dispatch_fwd(x, rows_of(xe_, c, plan_.row_xe));
  }
  timer_->end(kDispatchFwd);
}

// Where the backend reports chunk c's FP8 scales (null c: nowhere, for the shared experts).
void MoeLayer::report_fp8_scales_of(const Chunk* c) {
  if (!fp8_scales_) return;
  ops_.report_fp8_scales(c ? fp8_scales_ + c->index * kNumFp8Computed * d_.E_local : nullptr);
}

void MoeLayer::experts_fwd(const Chunk& c) {
  timer_->begin(kExpertsFwd);
  report_fp8_scales_of(&c);
  Dims d = d_;
  d.weight_grads_on_fwd_rows = !merged_;  // merged: on every chunk's rows, gathered
  ops_.expert_ffn_fwd(d, rows_of(xe_, c, plan_.row_xe), w_in_full_, w_out_full_,
                      c.dispatcher->expert_offsets(), rows_of(h_, c, plan_.row_2f),
                      rows_of(a_, c, plan_.row_f), rows_of(ye_, c, plan_.row_h));
  report_fp8_scales_of(nullptr);
  timer_->end(kExpertsFwd);
}

void MoeLayer::combine_fwd(const Chunk& c) {
  timer_->begin(kCombineFwd);
  c.dispatcher->combine_fwd(rows_of(ye_, c, plan_.row_h), tokens_of(p_, c, d_.K),
                            tokens_of(out_, c, d_.H, device_.storage_bytes()));
  timer_->end(kCombineFwd);
}

void MoeLayer::combine_bwd(const Chunk& c) {
  timer_->begin(kCombineBwd);
  c.dispatcher->combine_bwd(tokens_of(dout_, c, d_.H, device_.storage_bytes()),
                            tokens_of(p_, c, d_.K), rows_of(dye_, c, plan_.row_h),
                            tokens_of(dp_, c, d_.K));
  timer_->end(kCombineBwd);
}

void MoeLayer::experts_bwd_data(const Chunk& c) {
  timer_->begin(kExpertsBwd);
  report_fp8_scales_of(&c);
  ops_.expert_ffn_bwd_data(d_, rows_of(dye_, c, plan_.row_h), rows_of(h_, c, plan_.row_2f),
                           w_in_full_, w_out_full_, c.dispatcher->expert_offsets(),
                           rows_of(da_, c, plan_.row_f), rows_of(dh_, c, plan_.row_2f),
                           rows_of(dxe_, c, plan_.row_h));
  report_fp8_scales_of(nullptr);
  timer_->end(kExpertsBwd);
}

// With chunks, their rows are gathered first (merge_chunks' layout) into buffers the backward is
// done with: ye, da and h once every chunk's data gradients have run, and xw (dxe may still feed
// the last chunk's dispatch_bwd on the side lane).
void MoeLayer::experts_bwd_weights() {
  timer_->begin(kExpertsBwd);
  if (!merged_) {
    ops_.expert_ffn_bwd_weights(d_, dye_.ptr(), xe_.ptr(), a_.ptr(), dh_.ptr(),
                                chunks_.front().dispatcher->expert_offsets(), dw_in_full_,
                                dw_out_full_);
  } else {
    const ExpertOffsets rows = merged_offsets();
    auto gather = [&](const GrownBuffer& from, int64_t row_bytes, const GrownBuffer& to) {
      ops_.gather_chunk_rows(d_, int64_t(chunks_.size()), merged_offsets_, merged_blocks_,
                             rows.rows_bound, from.ptr(), size_t(row_bytes), to.ptr());
      return to.ptr();
    };
    void* dye = gather(dye_, plan_.row_h, ye_);
    void* xe = gather(xe_, plan_.row_xe, xw_);
    void* a = gather(a_, plan_.row_f, da_);
    void* dh = gather(dh_, plan_.row_2f, h_);
    ops_.expert_ffn_bwd_weights(d_, dye, xe, a, dh, rows, dw_in_full_, dw_out_full_);
  }
  timer_->end(kExpertsBwd);
}

void MoeLayer::experts_bwd_weights_and_shared() {
  experts_bwd_weights();
  if (shared_) shared_bwd();
}

// dx back to its tokens (the adjoint of the dispatch), on whichever lane the caller chose.
void MoeLayer::dispatch_bwd(const Chunk& c) {
  timer_->begin(kDispatchBwd);
  c.dispatcher->dispatch_bwd(rows_of(dxe_, c, plan_.row_h), tokens_of(dx_acc_, c, d_.H));
  timer_->end(kDispatchBwd);
}

void MoeLayer::shared_fwd() {
  timer_->begin(kSharedFwd);
  shared_->forward(x_, quantize_weights_);
  timer_->end(kSharedFwd);
}

void MoeLayer::shared_bwd() {
  timer_->begin(kSharedBwd);
  shared_->backward(x_, dout_);
  timer_->end(kSharedBwd);
}

StepTraffic MoeLayer::traffic() {
  StepTraffic sum;
  for (const Chunk& c : chunks_) {
    const StepTraffic t = c.dispatcher->traffic();
    for (int dir = 0; dir < kNumDirs; ++dir) sum.bytes_to_others[dir] += t.bytes_to_others[dir];
    sum.rows_to_others += t.rows_to_others;
    sum.rows_received += t.rows_received;
    sum.rows_dropped += t.rows_dropped;
    sum.rows_padded += t.rows_padded;
  }
  return sum;
}

void MoeLayer::fsdp_gather() {
  if (shared_) shared_->gather();
  if (d_.fsdp == 1) return;
  const size_t sb = device_.storage_bytes();
  comm_.allgather(w_in_shard_, w_in_full_, sb * shard_in_, Group::kFsdp);
  comm_.allgather(w_out_shard_, w_out_full_, sb * shard_out_, Group::kFsdp);
}

void MoeLayer::route() {
  ops_.router_fwd(d_, w_.router, x_, w_gate_, expert_bias_, forced_idx_, logits_, scores_, idx_, p_,
                  stats_);
  // The aux loss counts the world's tokens: sum the per-rank counts and score sums.
  comm_.allreduce_f32(stats_, 2 * d_.E + 1, Group::kWorld);
  if (slot_idx_) ops_.experts_to_slots(d_, idx_, slot_of_expert_, slot_idx_);
}

void MoeLayer::grad_sync() {
  comm_.allreduce_f32(dw_gate_, d_.H * d_.E, Group::kWorld);
  if (shared_) shared_->grad_sync();
  if (d_.fsdp == 1) return;
  comm_.reduce_scatter(dw_in_full_, dw_in_shard_, shard_in_, d_.grad_dtype, Group::kFsdp);
  comm_.reduce_scatter(dw_out_full_, dw_out_shard_, shard_out_, d_.grad_dtype, Group::kFsdp);
}

void MoeLayer::download_expert_grads(int64_t slot, std::vector<float>& dw_in,
                                     std::vector<float>& dw_out) {
  MOE_CHECK(0 <= slot && slot < d_.E_local,
            "download_expert_grads: local slot " << slot << " of " << d_.E_local);
  download_expert_grad_range(slot, 1, dw_in, dw_out);
}

void MoeLayer::download_expert_grad_range(int64_t first, int64_t count, std::vector<float>& dw_in,
                                          std::vector<float>& dw_out) {
  const int64_t in = d_.H * 2 * d_.F, out = d_.F * d_.H;
  const size_t gb = device_.bytes_of(d_.grad_dtype);
  dw_in.resize(count * in);
  dw_out.resize(count * out);
  device_.download_floats(dw_in.data(), static_cast<const char*>(dw_in_full_) + gb * first * in,
                          count * in, d_.grad_dtype);
  device_.download_floats(dw_out.data(), static_cast<const char*>(dw_out_full_) + gb * first * out,
                          count * out, d_.grad_dtype);
}

std::vector<std::pair<std::string, uint64_t>> MoeLayer::digest_outputs() {
  const size_t sb = device_.storage_bytes(), gb = device_.bytes_of(d_.grad_dtype);
  const size_t T = size_t(d_.T), H = size_t(d_.H), E = size_t(d_.E), K = size_t(d_.K);
  std::vector<std::pair<std::string, uint64_t>> digests = {
      {"out", device_.digest(out_, sb * T * H)},
      {"dx", device_.digest(dx_, sb * T * H)},
      {"dw_gate", device_.digest(dw_gate_, 4 * H * E)},
      {"dw_in", device_.digest(dw_in_shard_, gb * size_t(shard_in_))},
      {"dw_out", device_.digest(dw_out_shard_, gb * size_t(shard_out_))},
      {"idx", device_.digest(idx_, 4 * T * K)}};
  if (shared_)
    for (auto& d : shared_->digests()) digests.push_back(std::move(d));
  return digests;
}

StepOutputs MoeLayer::download_outputs(const OutputsWanted& want) {
  const int64_t T = d_.T, H = d_.H, F = d_.F, E = d_.E, K = d_.K, El = d_.E_local;
  StepOutputs o;
  auto storage = [&](const void* src, int64_t n) {
    std::vector<float> v(n);
    device_.download_storage(v.data(), src, n);
    return v;
  };
  auto fp32 = [&](const float* src, int64_t n) {
    std::vector<float> v(n);
    device_.copy_to_host(v.data(), src, 4 * n);
    return v;
  };
  o.x = storage(x_, T * H);
  o.dout = storage(dout_, T * H);
  o.out = storage(out_, T * H);
  o.dx = storage(dx_, T * H);
  o.idx.resize(T * K);
  device_.copy_to_host(o.idx.data(), idx_, 4 * T * K);
  o.p = fp32(p_, T * K);
  std::vector<int32_t> send_pos(T * K);
  const size_t chunk_bytes = 4 * size_t(T / int64_t(chunks_.size()) * K);
  for (const Chunk& c : chunks_)
    device_.copy_to_host(tokens_of(send_pos.data(), c, K), c.dispatcher->send_pos(), chunk_bytes);
  o.dropped.resize(T * K);
  for (int64_t i = 0; i < T * K; ++i) o.dropped[i] = send_pos[i] < 0;
  o.w_gate = storage(w_gate_, H * E);
  o.dw_gate = fp32(dw_gate_, H * E);
  if (expert_bias_) o.expert_bias = fp32(expert_bias_, E);
  o.experts = local_experts_;
  if (want.expert_weights) {
    o.w_in = storage(w_in_full_, El * H * 2 * F);
    o.w_out = storage(w_out_full_, El * F * H);
  }
  // Gather the reduced shards back into the (now free) full-gradient buffers.
  if (d_.fsdp > 1) {
    const size_t gb = device_.bytes_of(d_.grad_dtype);
    comm_.allgather(dw_in_shard_, dw_in_full_, gb * shard_in_, Group::kFsdp);
    comm_.allgather(dw_out_shard_, dw_out_full_, gb * shard_out_, Group::kFsdp);
  }
  if (want.expert_grads) download_expert_grad_range(0, El, o.dw_in, o.dw_out);
  if (shared_) {
    if (want.expert_weights) {
      o.w_sh_in = shared_->weights_in();
      o.w_sh_out = shared_->weights_out();
    }
    shared_->gradients(o.dw_sh_in, o.dw_sh_out);
  }

  if (fp8_scales_) {
    const int64_t chunks = int64_t(chunks_.size());
    std::vector<float> mine(size_t(chunks * kNumFp8Computed * El));
    device_.copy_to_host(mine.data(), fp8_scales_, 4 * mine.size());
    o.fp8_scales.assign(size_t(chunks * kNumFp8Computed * E), 0.0f);
    for (int64_t ck = 0; ck < chunks * kNumFp8Computed; ++ck)
      for (int64_t slot = 0; slot < El; ++slot)
        o.fp8_scales[size_t(ck * E + local_experts_[size_t(slot)])] = mine[size_t(ck * El + slot)];
  }

  std::vector<float> stats(2 * E + 1);
  device_.copy_to_host(stats.data(), stats_, 4 * stats.size());
  router_losses(stats.data(), w_.router, E, K, d_.N, &o.aux, &o.z);
  return o;
}

ReferenceInputs reference_inputs(const StepOutputs& o, int64_t step) {
  ReferenceInputs in;
  in.x = o.x.data();
  in.dout = o.dout.data();
  in.got_idx = o.idx.data();
  in.got_dropped = o.dropped.data();
  if (!o.fp8_scales.empty()) in.got_fp8_scales = &o.fp8_scales;
  in.step = step;
  return in;
}

}  // namespace moe
