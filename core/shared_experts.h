#pragma once
// The shared experts (MATH.md "Shared experts"): S dense SwiGLU FFNs that every token of the rank
// passes through with weight 1, their outputs added to the routed output. Their weights are held
// by every EP rank and split over the FSDP group like the routed experts'; their gradients sum
// over every rank's tokens. Each shared expert is one call of the routed experts' Ops (one
// "expert" whose rows are the rank's T tokens), so every backend and GEMM method runs them as it
// runs the experts. MoeLayer calls one method per part of the step and times it; each runs on the
// lane the caller has current.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm.h"
#include "core/buffer_plan.h"
#include "core/device.h"
#include "core/mesh.h"
#include "core/ops.h"
#include "core/workload.h"

namespace moe {

class SharedExperts {
 public:
  // d: the step's dims. Allocates from plan.shared and fills this rank's weight shards from the
  // seed (each global element from its index, as the routed experts', so that they do not depend
  // on the mesh).
  SharedExperts(const Workload& w, const Mesh& mesh, const Dims& d, const SharedBuffers& plan,
                Device& device, Ops& ops, Comm& comm);
  ~SharedExperts();
  SharedExperts(const SharedExperts&) = delete;
  SharedExperts& operator=(const SharedExperts&) = delete;

  // The FSDP all-gather of the weights (nothing at fsdp 1).
  void gather();
  // h, a and y of every shared expert for x [T, H] storage; first, with quantize_weights, the
  // weights' FP8 codes (Ops::prepare_expert_weights).
  void forward(const void* x, bool quantize_weights);
  // The weights' FP8 codes alone (MoeLayer::time_weight_quantization).
  void quantize_weights();
  // out [T, H] storage = out + sum_s y[s]: after the routed combine has written out.
  void add_to_out(void* out);
  // The backward for dout [T, H] (each shared expert's dy, its weight being 1): the data
  // gradients (into y's buffer, free since add_to_out) and the weight gradients.
  void backward(const void* x, const void* dout);
  // dx_acc [T, H] fp32 += the shared experts' data gradients: after the routed ones are in.
  void add_to_dx(float* dx_acc);
  // Sums the weight gradients over every rank: a reduce-scatter over the world, then an
  // all-gather over the EP group, leaves each rank its FSDP shard of the sum.
  void grad_sync();

  // Digests of this rank's gradient shards (dw_sh_in, dw_sh_out), computed where they live.
  std::vector<std::pair<std::string, uint64_t>> digests();
  // Host copies (untimed): the full weights as used, [S, H, 2F_sh] and [S, F_sh, H].
  std::vector<float> weights_in();
  std::vector<float> weights_out();
  // The full gradients after grad_sync, on every rank (collective over the FSDP group: gathers
  // the shards back into the full buffers).
  void gradients(std::vector<float>& dw_in, std::vector<float>& dw_out);

 private:
  void* alloc(int64_t bytes);
  // Byte offset of shared expert s's part of a tensor of `per_expert` elements of `elem` bytes.
  static void* at(void* base, int64_t s, int64_t per_expert, size_t elem);

  Dims d_;  // one shared expert per Ops call: E_local 1, F = F_sh
  int64_t S_ = 0;
  int ep_ = 1, fsdp_ = 1;
  int64_t n_in_ = 0, n_out_ = 0;  // S * H * 2F_sh, S * F_sh * H
  SharedBuffers plan_;
  Device& device_;
  Ops& ops_;
  Comm& comm_;
  std::vector<void*> owned_;
  // {0, T}: the one "expert" owns every token's row (host, and uploaded once to the device).
  std::vector<int64_t> offsets_host_;
  ExpertOffsets offsets_;

  void *w_in_shard_ = nullptr, *w_out_shard_ = nullptr;  // storage, this rank's FSDP shard
  void *w_in_full_ = nullptr, *w_out_full_ = nullptr;    // gathered (the shard at fsdp 1)
  // Gradients (grad dtype): this rank's partial sums over its tokens, padded to world parts; the
  // rank's part of the world's sum; its FSDP shard (ep parts).
  void *dw_in_full_ = nullptr, *dw_out_full_ = nullptr;
  void *dw_in_part_ = nullptr, *dw_out_part_ = nullptr;
  void *dw_in_shard_ = nullptr, *dw_out_shard_ = nullptr;
  void *h_ = nullptr, *a_ = nullptr, *y_ = nullptr, *da_ = nullptr, *dh_ = nullptr;
};

}  // namespace moe
