#include "core/shared_experts.h"

#include <algorithm>

#include "core/error.h"
#include "core/init.h"

namespace moe {

SharedExperts::SharedExperts(const Workload& w, const Mesh& mesh, const Dims& d,
                             const SharedBuffers& plan, Device& device, Ops& ops, Comm& comm)
    : d_(d),
      S_(w.model.shared_experts),
      ep_(mesh.ep),
      fsdp_(mesh.fsdp),
      plan_(plan),
      device_(device),
      ops_(ops),
      comm_(comm) {
  MOE_CHECK(S_ > 0 && plan.shard_in_elems > 0, "shared experts without a plan");
  d_.F = w.model.shared_ffn;
  d_.E_local = 1;
  d_.dispatch_fp8 = false;  // their rows are the rank's own x, never dispatched
  const int64_t H = d_.H, F = d_.F;
  n_in_ = S_ * H * 2 * F;
  n_out_ = S_ * F * H;

  w_in_shard_ = alloc(plan.w_in_shard);
  w_out_shard_ = alloc(plan.w_out_shard);
  dw_in_full_ = alloc(plan.dw_in_full);
  dw_out_full_ = alloc(plan.dw_out_full);
  const bool sharded = fsdp_ > 1;
  w_in_full_ = sharded ? alloc(plan.w_in_full) : w_in_shard_;
  w_out_full_ = sharded ? alloc(plan.w_out_full) : w_out_shard_;
  dw_in_shard_ = sharded ? alloc(plan.dw_in_shard) : dw_in_full_;
  dw_out_shard_ = sharded ? alloc(plan.dw_out_shard) : dw_out_full_;
  // At ep 1 a rank's part of the world's sum is its whole FSDP shard.
  dw_in_part_ = ep_ > 1 ? alloc(plan.dw_in_part) : dw_in_shard_;
  dw_out_part_ = ep_ > 1 ? alloc(plan.dw_out_part) : dw_out_shard_;
  h_ = alloc(plan.h);
  a_ = alloc(plan.a);
  y_ = alloc(plan.y);
  da_ = alloc(plan.da);
  dh_ = alloc(plan.dh);
  offsets_host_ = {0, d_.T};
  auto* offsets_dev = static_cast<int64_t*>(alloc(plan.offsets));
  device.copy_to_device(offsets_dev, offsets_host_.data(), 8 * offsets_host_.size());
  offsets_ = {offsets_dev, offsets_host_.data(), d_.T};

  // Padding past the last element stays zero (the buffers are allocated zero-filled), in the
  // weights and in every gradient sum.
  auto load_shard = [&](int64_t elems, int64_t shard, const InitRule& rule, void* dst) {
    const int64_t begin = std::min(elems, mesh.fsdp_rank * shard);
    const int64_t end = std::min(elems, begin + shard);
    device.fill_seeded(dst, rule, begin, end - begin);
  };
  load_shard(n_in_, plan.shard_in_elems, w_sh_in_rule(w), w_in_shard_);
  load_shard(n_out_, plan.shard_out_elems, w_sh_out_rule(w), w_out_shard_);
}

SharedExperts::~SharedExperts() {
  for (void* p : owned_) device_.release(p);
}

void* SharedExperts::alloc(int64_t bytes) {
  void* p = device_.alloc(std::max<size_t>(size_t(bytes), 1));
  owned_.push_back(p);
  return p;
}

void* SharedExperts::at(void* base, int64_t s, int64_t per_expert, size_t elem) {
  return static_cast<char*>(base) + size_t(s * per_expert) * elem;
}

void SharedExperts::gather() {
  if (fsdp_ == 1) return;
  const size_t sb = device_.storage_bytes();
  comm_.allgather(w_in_shard_, w_in_full_, sb * plan_.shard_in_elems, Group::kFsdp);
  comm_.allgather(w_out_shard_, w_out_full_, sb * plan_.shard_out_elems, Group::kFsdp);
}

void SharedExperts::quantize_weights() {
  ops_.prepare_expert_weights(d_, S_, w_in_full_, w_out_full_);
}

void SharedExperts::forward(const void* x, bool quantize) {
  const int64_t T = d_.T, H = d_.H, F = d_.F;
  const size_t sb = device_.storage_bytes();
  if (quantize) quantize_weights();
  for (int64_t s = 0; s < S_; ++s)
    ops_.expert_ffn_fwd(d_, x, at(w_in_full_, s, H * 2 * F, sb), at(w_out_full_, s, F * H, sb),
                        offsets_, at(h_, s, T * 2 * F, sb), at(a_, s, T * F, sb),
                        at(y_, s, T * H, sb));
}

void SharedExperts::add_to_out(void* out) { ops_.shared_sum_out(d_, S_, y_, out); }

void SharedExperts::backward(const void* x, const void* dout) {
  const int64_t T = d_.T, H = d_.H, F = d_.F;
  const size_t sb = device_.storage_bytes(), gb = device_.bytes_of(d_.grad_dtype);
  // One expert at a time, so that da and dh serve them all.
  for (int64_t s = 0; s < S_; ++s) {
    void* w_in = at(w_in_full_, s, H * 2 * F, sb);
    void* w_out = at(w_out_full_, s, F * H, sb);
    ops_.expert_ffn_bwd_data(d_, dout, at(h_, s, T * 2 * F, sb), w_in, w_out, offsets_, da_, dh_,
                             at(y_, s, T * H, sb));
    ops_.expert_ffn_bwd_weights(d_, dout, x, at(a_, s, T * F, sb), dh_, offsets_,
                                at(dw_in_full_, s, H * 2 * F, gb), at(dw_out_full_, s, F * H, gb));
  }
}

void SharedExperts::add_to_dx(float* dx_acc) { ops_.shared_sum_dx(d_, S_, y_, dx_acc); }

void SharedExperts::grad_sync() {
  if (d_.world == 1) return;
  const size_t gb = device_.bytes_of(d_.grad_dtype);
  comm_.reduce_scatter(dw_in_full_, dw_in_part_, plan_.part_in_elems, d_.grad_dtype, Group::kWorld);
  comm_.reduce_scatter(dw_out_full_, dw_out_part_, plan_.part_out_elems, d_.grad_dtype,
                       Group::kWorld);
  if (ep_ == 1) return;
  // World rank fsdp_rank * ep + ep_rank holds part fsdp_rank * ep + ep_rank: its EP group's parts
  // are its FSDP shard.
  comm_.allgather(dw_in_part_, dw_in_shard_, gb * plan_.part_in_elems, Group::kEp);
  comm_.allgather(dw_out_part_, dw_out_shard_, gb * plan_.part_out_elems, Group::kEp);
}

std::vector<std::pair<std::string, uint64_t>> SharedExperts::digests() {
  const size_t gb = device_.bytes_of(d_.grad_dtype);
  return {{"dw_sh_in", device_.digest(dw_in_shard_, gb * size_t(plan_.shard_in_elems))},
          {"dw_sh_out", device_.digest(dw_out_shard_, gb * size_t(plan_.shard_out_elems))}};
}

std::vector<float> SharedExperts::weights_in() {
  std::vector<float> v(n_in_);
  device_.download_storage(v.data(), w_in_full_, n_in_);
  return v;
}

std::vector<float> SharedExperts::weights_out() {
  std::vector<float> v(n_out_);
  device_.download_storage(v.data(), w_out_full_, n_out_);
  return v;
}

void SharedExperts::gradients(std::vector<float>& dw_in, std::vector<float>& dw_out) {
  if (fsdp_ > 1) {
    const size_t gb = device_.bytes_of(d_.grad_dtype);
    comm_.allgather(dw_in_shard_, dw_in_full_, gb * plan_.shard_in_elems, Group::kFsdp);
    comm_.allgather(dw_out_shard_, dw_out_full_, gb * plan_.shard_out_elems, Group::kFsdp);
  }
  dw_in.resize(n_in_);
  dw_out.resize(n_out_);
  device_.download_floats(dw_in.data(), dw_in_full_, n_in_, d_.grad_dtype);
  device_.download_floats(dw_out.data(), dw_out_full_, n_out_, d_.grad_dtype);
}

}  // namespace moe
