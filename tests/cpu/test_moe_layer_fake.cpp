// MoeLayer over fake Device, Ops and Comm that record every call and compute nothing: the step's
// order of phases, where each buffer goes, the overlap's lanes, and no allocation in a steady
// step, pinned down independently of any backend's arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "core/device.h"
#include "core/layout.h"
#include "core/mesh.h"
#include "core/moe_layer.h"
#include "core/ops.h"
#include "core/workload.h"

namespace moe {
namespace {

struct Call {
  std::string name;
  std::vector<const void*> buffers;  // the call's main inputs and outputs, in its argument order
  const int64_t* offsets = nullptr;  // expert offsets, for the expert FFN calls
  int lane = kMainLane;              // the lane current when it was issued
};

struct Recorder {
  std::vector<Call> calls;
  int lane = kMainLane;
  void add(std::string name, std::vector<const void*> buffers = {},
           const int64_t* offsets = nullptr) {
    calls.push_back({std::move(name), std::move(buffers), offsets, lane});
  }
  // Positions of the calls named `name`.
  std::vector<size_t> at(const std::string& name) const {
    std::vector<size_t> out;
    for (size_t i = 0; i < calls.size(); ++i)
      if (calls[i].name == name) out.push_back(i);
    return out;
  }
  const Call& only(const std::string& name) const {
    const std::vector<size_t> p = at(name);
    EXPECT_EQ(p.size(), 1u) << name;
    return calls[p.empty() ? 0 : p[0]];
  }
};

class NoTimer : public PhaseTimer {
 public:
  explicit NoTimer(int n) : n_(n) {}
  void begin(int) override {}
  void end(int) override {}
  std::vector<double> read() override { return std::vector<double>(n_, 0.0); }
  const std::vector<PhaseInterval>& intervals() const override { return none_; }

 private:
  int n_;
  std::vector<PhaseInterval> none_;
};

class FakeDevice : public Device {
 public:
  explicit FakeDevice(Recorder& r) : r_(r) {}
  std::string name() const override { return "fake"; }
  void* alloc(size_t bytes) override {
    r_.add("alloc");
    return std::calloc(1, bytes);
  }
  void release(void* p) override {
    if (p) r_.add("release");
    std::free(p);
  }
  size_t bytes_of(DType) const override { return 4; }
  DType storage_dtype() const override { return DType::kFp32; }
  void download_floats(float* dst, const void* src, int64_t n, DType) override {
    std::memcpy(dst, src, 4 * n);
  }
  void fill_seeded(void*, const InitRule&, int64_t, int64_t) override {}
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  uint64_t digest(const void*, size_t) override { return 0; }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void sync() override {}
  void fork_side() override {
    r_.add("fork_side");
    r_.lane = kSideLane;
  }
  void to_main() override {
    r_.add("to_main");
    r_.lane = kMainLane;
  }
  void join_side() override { r_.add("join_side"); }
  int64_t memory_high_water() const override { return 0; }
  void reset_memory_high_water() override {}
  std::unique_ptr<PhaseTimer> make_timer(std::vector<std::string> names) override {
    return std::make_unique<NoTimer>(int(names.size()));
  }
  double time_memory_copy_ms(int64_t, int) override { return 1; }

 private:
  Recorder& r_;
};

// Records the compute phases; the only one that writes is the layout, which routes row (t, k) to
// expert (t*K + k) % E, so that the dispatcher's counts and offsets are known.
class FakeOps : public Ops {
 public:
  explicit FakeOps(Recorder& r) : r_(r) {}
  std::string name() const override { return "fake"; }
  double time_dense_gemm_ms(int64_t, int64_t, int64_t, int) override { return 1; }
  void router_fwd(const Dims&, const RouterConfig&, const void* x, const void*, const float*,
                  const int32_t*, float*, float*, int32_t* idx, float* p, float*) override {
    r_.add("router_fwd", {x, idx, p});
  }
  void router_bwd(const Dims&, const RouterConfig&, const void* x, const void*, const float*,
                  const float*, const int32_t*, const float* dp, const float*, float*,
                  float* dx_acc, void* dx, float*) override {
    r_.add("router_bwd", {x, dp, dx_acc, dx});
  }
  void prepare_expert_weights(const Dims&, int64_t, const void* w_in, const void* w_out) override {
    r_.add("prepare_expert_weights", {w_in, w_out});
  }
  void experts_to_slots(const Dims& d, const int32_t* idx, const int32_t* slot_of,
                        int32_t* slots) override {
    r_.add("experts_to_slots", {idx, slot_of, slots});
    for (int64_t i = 0; i < d.T * d.K; ++i) slots[i] = slot_of[idx[i]];
  }
  void dispatch_layout(const Dims& d, const int32_t*, const float*, int32_t* counts,
                       int32_t* send_pos) override {
    r_.add("dispatch_layout");
    std::vector<int32_t> next(d.E, 0);
    for (int64_t i = 0; i < d.T * d.K; ++i) ++next[i % d.E];
    std::fill(counts, counts + d.E, 0);
    std::vector<int32_t> start(d.E, 0);
    for (int64_t e = 1; e < d.E; ++e) start[e] = start[e - 1] + next[e - 1];
    for (int64_t i = 0; i < d.T * d.K; ++i) send_pos[i] = start[i % d.E] + counts[i % d.E]++;
  }
  void expert_major_positions(const Dims&, const int32_t*, const int32_t*, const int32_t*,
                              int32_t*) override {
    r_.add("expert_major_positions");
  }
  void dedup_layout(const Dims&, const int32_t*, const float*, const int32_t*, const int32_t*,
                    int32_t*, int32_t*, int32_t*, float*) override {
    r_.add("dedup_layout");
  }
  void pack_fp8_rows(const Dims&, const void* x, int64_t, void* packed) override {
    r_.add("pack_fp8_rows", {x, packed});
  }
  void permute(const Dims&, const void* x, const int32_t*, void* send) override {
    r_.add("permute", {x, send});
  }
  void expert_offsets(const Dims& d, const int32_t* counts, int64_t stride,
                      int64_t* offsets) override {
    r_.add("expert_offsets");
    expert_major_offsets_strided(counts, d.ep, stride, d.E_local, d.align, offsets);
  }
  void expert_blocks(const Dims& d, const int32_t* counts, int64_t stride, int64_t first,
                     int32_t* table, int64_t* offsets) override {
    r_.add("expert_blocks");
    expert_block_table(counts, d.ep, stride, first, d.E_local, d.align, table, offsets);
  }
  void merge_chunk_layout(const Dims& d, const std::vector<ChunkRows>& chunks, int64_t* offsets,
                          int64_t* blocks) override {
    r_.add("merge_chunk_layout");
    merged_chunk_layout(chunks.data(), int64_t(chunks.size()), d.ep, d.E_local, d.align, offsets,
                        blocks);
  }
  void rows_to_ranks(const Dims&, const void* src, size_t, const int32_t*, int64_t,
                     const RankBases&) override {
    r_.add("rows_to_ranks", {src});
  }
  void rows_to_sources(const Dims&, const void* src, size_t, const int32_t*, int64_t,
                       const RankBases&) override {
    r_.add("rows_to_sources", {src});
  }
  void gather_chunk_rows(const Dims&, int64_t, const int64_t*, const int64_t*, int64_t,
                         const void* src, size_t, void* dst) override {
    r_.add("gather_chunk_rows", {src, dst});
  }
  void zero_expert_padding(const Dims&, const int32_t*, const int64_t*,
                           void* expert_major) override {
    r_.add("zero_expert_padding", {expert_major});
  }
  void regroup(const Dims&, const void* src, const int32_t*, int64_t, bool to_expert_major,
               void* dst) override {
    r_.add(to_expert_major ? "regroup_to_experts" : "regroup_to_send", {src, dst});
  }
  void report_fp8_scales(float*) override {}  // bf16 only
  void expert_ffn_fwd(const Dims&, const void* xe, const void*, const void*,
                      const ExpertOffsets& off, void* h, void* a, void* ye) override {
    r_.add("expert_ffn_fwd", {xe, h, a, ye}, off.device);
  }
  void expert_ffn_bwd_data(const Dims&, const void* dye, const void* h, const void*, const void*,
                           const ExpertOffsets& off, void* da, void* dh, void* dxe) override {
    r_.add("expert_ffn_bwd_data", {dye, h, da, dh, dxe}, off.device);
  }
  void expert_ffn_bwd_weights(const Dims&, const void* dye, const void* xe, const void* a,
                              const void* dh, const ExpertOffsets& off, void* dw_in,
                              void*) override {
    r_.add("expert_ffn_bwd_weights", {dye, xe, a, dh, dw_in}, off.device);
  }
  void combine_fwd(const Dims&, const void* y_send, const int32_t*, const float*,
                   void* out) override {
    r_.add("combine_fwd", {y_send, out});
  }
  void combine_fwd_f32(const Dims&, const void* y_send, const int32_t*, const float*,
                       float* out) override {
    r_.add("combine_fwd_f32", {y_send, out});
  }
  void to_storage(const Dims&, const float* src, int64_t, void* dst) override {
    r_.add("to_storage", {src, dst});
  }
  void combine_bwd(const Dims&, const void* dout, const void* y_send, const int32_t*, const float*,
                   void* dy_send, float* dp) override {
    r_.add("combine_bwd", {dout, y_send, dy_send, dp});
  }
  void unpermute_sum(const Dims&, const void* dx_send, const int32_t*, float* dx_acc) override {
    r_.add("unpermute_sum", {dx_send, dx_acc});
  }
  void unpermute_sum_storage(const Dims&, const void* src, const int32_t*, void* dst) override {
    r_.add("unpermute_sum_storage", {src, dst});
  }
  void shared_sum_out(const Dims&, int64_t, const void* y_sh, void* out) override {
    r_.add("shared_sum_out", {y_sh, out});
  }
  void shared_sum_dx(const Dims&, int64_t, const void* dx_sh, float* dx_acc) override {
    r_.add("shared_sum_dx", {dx_sh, dx_acc});
  }

 private:
  Recorder& r_;
};

// A world of one rank: every collective copies its input to its output.
class FakeComm : public Comm {
 public:
  explicit FakeComm(Recorder& r) : r_(r) {}
  int rank(Group) const override { return 0; }
  int size(Group) const override { return 1; }
  void alltoallv_rows(const void* send, const int64_t* send_rows, void* recv, const int64_t*,
                      size_t row_bytes, Group) override {
    r_.add("alltoallv_rows");
    std::memcpy(recv, send, size_t(send_rows[0]) * row_bytes);
  }
  void alltoall_i32(const int32_t* send, int32_t* recv, int64_t n, Group) override {
    r_.add("alltoall_i32");
    std::memcpy(recv, send, 4 * size_t(n));
  }
  void allgather(const void* send, void* recv, size_t bytes, Group) override {
    r_.add("allgather");
    std::memcpy(recv, send, bytes);
  }
  void reduce_scatter(const void*, void*, size_t, DType, Group) override {
    r_.add("reduce_scatter");
  }
  void allreduce_f32(float*, size_t, Group) override { r_.add("allreduce_f32"); }
  std::unique_ptr<PeerWindow> open_window(size_t, Group) override {
    throw std::logic_error("FakeComm has no windows");
  }

 private:
  Recorder& r_;
};

struct FakeStep {
  Recorder r;
  FakeDevice device{r};
  FakeOps ops{r};
  FakeComm comm{r};
  Workload w;
  Mesh mesh;
  std::unique_ptr<MoeLayer> layer;

  // shared: how many shared experts (of width 12).
  explicit FakeStep(const std::string& sets, int64_t shared = 0) {
    w = workload_from_json_text(R"({"model": {"hidden": 16, "ffn": 8, "experts": 4, "topk": 2},
                                    "tokens_per_rank": 8, "check": "off")" +
                                    sets + "}",
                                "fake");
    w.model.shared_experts = shared;
    w.model.shared_ffn = 12;
    resolve_and_validate(w, 1);
    mesh = make_mesh(1, 0, 1, 1, w.model.experts);
    layer = std::make_unique<MoeLayer>(w, mesh, device, ops, comm);
  }
  // One step's calls (the recorder is cleared first).
  const Recorder& step(int64_t s = 0) {
    r.calls.clear();
    std::vector<double> ms;
    layer->load_step_inputs(s);
    layer->run_step(ms);
    return r;
  }
};

bool before(const Recorder& r, const std::string& a, const std::string& b) {
  const auto pa = r.at(a), pb = r.at(b);
  return !pa.empty() && !pb.empty() && pa.back() < pb.front();
}

TEST(MoeLayerFake, PhasesRunInStepOrder) {
  FakeStep f("");
  const Recorder& r = f.step();
  const std::vector<std::string> order = {"router_fwd",
                                          "dispatch_layout",
                                          "permute",
                                          "expert_ffn_fwd",
                                          "combine_fwd",
                                          "combine_bwd",
                                          "expert_ffn_bwd_data",
                                          "expert_ffn_bwd_weights",
                                          "unpermute_sum",
                                          "router_bwd"};
  std::vector<std::string> seen;
  for (const Call& c : r.calls)
    if (std::find(order.begin(), order.end(), c.name) != order.end()) seen.push_back(c.name);
  EXPECT_EQ(seen, order);
  // The router's statistics are summed over the world before the layout, the router's gradients
  // after the backward; at ep 1 the counts received are the rank's own, so none are exchanged
  // (mpi cases check the exchange at ep > 1 against the reference).
  EXPECT_TRUE(r.at("alltoall_i32").empty());
  EXPECT_EQ(r.at("allreduce_f32").size(), 2u);  // router statistics, dw_gate
  EXPECT_LT(r.at("allreduce_f32")[0], r.at("dispatch_layout")[0]);
  EXPECT_GT(r.at("allreduce_f32")[1], r.at("router_bwd")[0]);
}

TEST(MoeLayerFake, BuffersFlowFromPhaseToPhase) {
  FakeStep f("");  // ep 1, align 1: the send order is the experts' order, no regroups
  const Recorder& r = f.step();
  EXPECT_TRUE(r.at("regroup_to_experts").empty());
  const Call& permute = r.only("permute");
  const Call& fwd = r.only("expert_ffn_fwd");
  const Call& bwd_data = r.only("expert_ffn_bwd_data");
  const Call& bwd_w = r.only("expert_ffn_bwd_weights");
  EXPECT_EQ(fwd.buffers[0], permute.buffers[1]);                     // xe is what the permute wrote
  EXPECT_EQ(r.only("combine_fwd").buffers[0], fwd.buffers[3]);       // y read where ye was written
  EXPECT_EQ(bwd_data.buffers[0], r.only("combine_bwd").buffers[2]);  // dye
  EXPECT_EQ(bwd_data.buffers[1], fwd.buffers[1]);                    // h of the forward
  EXPECT_EQ(bwd_w.buffers[0], bwd_data.buffers[0]);                  // dye
  EXPECT_EQ(bwd_w.buffers[1], fwd.buffers[0]);                       // xe
  EXPECT_EQ(bwd_w.buffers[2], fwd.buffers[2]);                       // a
  EXPECT_EQ(bwd_w.buffers[3], bwd_data.buffers[3]);                  // dh
  EXPECT_EQ(r.only("unpermute_sum").buffers[0], bwd_data.buffers[4]);  // dxe back to tokens
  EXPECT_EQ(r.only("router_bwd").buffers[2], r.only("unpermute_sum").buffers[1]);  // dx_acc
  // 8 tokens x 2 = 16 rows, 4 per expert.
  EXPECT_EQ(fwd.offsets[0], 0);
  EXPECT_EQ(fwd.offsets[4], 16);
}

TEST(MoeLayerFake, OverlapPutsTheDispatchBackwardOnTheSideLane) {
  FakeStep plain("");
  EXPECT_TRUE(plain.step().at("fork_side").empty());
  FakeStep f(R"(, "overlap": "dispatch_bwd")");
  const Recorder& r = f.step();
  EXPECT_TRUE(before(r, "expert_ffn_bwd_data", "fork_side"));
  EXPECT_TRUE(before(r, "fork_side", "unpermute_sum"));
  EXPECT_TRUE(before(r, "unpermute_sum", "to_main"));
  EXPECT_TRUE(before(r, "to_main", "expert_ffn_bwd_weights"));
  EXPECT_TRUE(before(r, "expert_ffn_bwd_weights", "join_side"));
  EXPECT_TRUE(before(r, "join_side", "router_bwd"));
}

// At ep 1 with align > 1 (every dispatch kind: alltoall's local path): the positions come from the
// layout, one permute brings x to its padded expert-major places, two more calls write the padding
// rows of xe and dye, the combines and the unpermute read the experts' buffers directly, and no
// regroup copies a row.
void expect_rows_placed_directly(const Recorder& r) {
  EXPECT_TRUE(r.at("regroup_to_experts").empty());
  EXPECT_TRUE(r.at("regroup_to_send").empty());
  EXPECT_TRUE(before(r, "dispatch_layout", "expert_major_positions"));
  EXPECT_TRUE(before(r, "expert_blocks", "expert_major_positions"));
  const std::vector<size_t> padding = r.at("zero_expert_padding");
  ASSERT_EQ(padding.size(), 2u);
  const Call& fwd = r.only("expert_ffn_fwd");
  const Call& bwd_data = r.only("expert_ffn_bwd_data");
  EXPECT_EQ(fwd.buffers[0], r.only("permute").buffers[1]);             // x into xe
  EXPECT_EQ(fwd.buffers[0], r.calls[padding[0]].buffers[0]);           // xe's padding
  EXPECT_EQ(r.calls[padding[1]].buffers[0], bwd_data.buffers[0]);      // dye's padding
  EXPECT_EQ(r.only("combine_fwd").buffers[0], fwd.buffers[3]);         // ye
  EXPECT_EQ(r.only("combine_bwd").buffers[1], fwd.buffers[3]);         // ye again
  EXPECT_EQ(r.only("combine_bwd").buffers[2], bwd_data.buffers[0]);    // dye
  EXPECT_EQ(r.only("unpermute_sum").buffers[0], bwd_data.buffers[4]);  // dxe
  EXPECT_TRUE(r.at("combine_fwd_f32").empty());
  for (int l = 0; l <= 4; ++l) EXPECT_EQ(fwd.offsets[l], 16 * l) << l;  // 4 rows padded to 16
}

TEST(MoeLayerFake, AlltoallAtEp1PlacesPaddedRowsDirectly) {
  FakeStep f(R"(, "align": 16)");
  expect_rows_placed_directly(f.step());
}

// Every dispatch kind at ep 1 is alltoall's local path, call for call (so every result is
// alltoall's, bitwise): no gather, reduce-scatter, wire layout or window.
TEST(MoeLayerFake, EveryDispatchAtEp1IsAlltoall) {
  auto names = [](const Recorder& r) {
    std::vector<std::string> out;
    for (const Call& c : r.calls) out.push_back(c.name);
    return out;
  };
  for (const std::string align : {"", R"(, "align": 16)"}) {
    FakeStep a2a(align);
    const std::vector<std::string> want = names(a2a.step());
    for (const char* absent : {"allgather", "reduce_scatter", "dedup_layout"})
      EXPECT_TRUE(std::find(want.begin(), want.end(), absent) == want.end()) << absent;
    for (const char* kind : {"allgather", "alltoall_dedup", "nvlink"}) {
      FakeStep other(std::string(R"(, "dispatch": ")") + kind + "\"" + align);
      EXPECT_EQ(names(other.step()), want) << kind << align;
    }
  }
}

// fp8_weights: per_step quantizes the routed and the shared experts' weights in every step, before
// their first FFN call; cached in the first step only, the later steps reusing the codes.
TEST(MoeLayerFake, Fp8WeightsPerStepOrCachedOnce) {
  for (const char* when : {"per_step", "cached"}) {
    SCOPED_TRACE(when);
    FakeStep f(std::string(R"(, "precision": "fp8_block", "fp8_weights": ")") + when + "\"", 1);
    for (int64_t s = 0; s < 3; ++s) {
      const Recorder& r = f.step(s);
      const size_t quantized = r.at("prepare_expert_weights").size();
      if (s == 0 || std::string(when) == "per_step") {
        ASSERT_EQ(quantized, 2u) << "step " << s;  // the routed experts', the shared expert's
        EXPECT_TRUE(before(r, "prepare_expert_weights", "expert_ffn_fwd")) << "step " << s;
      } else {
        EXPECT_EQ(quantized, 0u) << "step " << s;
      }
    }
  }
  FakeStep bf16("", 1);  // bf16 steps call it too; the backend decides there is nothing to do
  EXPECT_EQ(bf16.step().at("prepare_expert_weights").size(), 2u);
}

// The shared experts' calls: one "expert" per Ops call, whose rows are the rank's 8 tokens (the
// routed experts' first block has 4 rows).
std::vector<size_t> shared_calls(const Recorder& r, const std::string& name) {
  std::vector<size_t> out;
  for (size_t i : r.at(name))
    if (r.calls[i].offsets && r.calls[i].offsets[0] == 0 && r.calls[i].offsets[1] == 8)
      out.push_back(i);
  return out;
}

TEST(MoeLayerFake, SharedExpertsTakeEveryTokenAndJoinTheSums) {
  FakeStep f("", 2);
  const Recorder& r = f.step();
  const std::vector<size_t> fwd = shared_calls(r, "expert_ffn_fwd");
  const std::vector<size_t> data = shared_calls(r, "expert_ffn_bwd_data");
  const std::vector<size_t> wgrad = shared_calls(r, "expert_ffn_bwd_weights");
  ASSERT_EQ(fwd.size(), 2u);
  ASSERT_EQ(data.size(), 2u);
  ASSERT_EQ(wgrad.size(), 2u);
  EXPECT_EQ(r.at("expert_ffn_fwd").size(), 3u);  // and the routed experts' one
  const void* x = r.only("router_fwd").buffers[0];
  const void* dout = r.only("combine_bwd").buffers[0];
  for (size_t s = 0; s < 2; ++s) {
    const Call &fw = r.calls[fwd[s]], &bd = r.calls[data[s]], &bw = r.calls[wgrad[s]];
    EXPECT_EQ(fw.buffers[0], x);              // every token, not the dispatched rows
    EXPECT_EQ(bd.buffers[0], dout);           // weight 1: dy = dout
    EXPECT_EQ(bd.buffers[1], fw.buffers[1]);  // its own h
    EXPECT_EQ(bw.buffers[1], x);
    EXPECT_EQ(bw.buffers[2], fw.buffers[2]);  // its own a
    EXPECT_EQ(bw.buffers[3], bd.buffers[3]);  // dh of the data half
    EXPECT_EQ(bd.buffers[4], fw.buffers[3]);  // dx into y's buffer, free since the forward
    EXPECT_LT(data[s], wgrad[s]);
  }
  // The expert after the first: the next [T, H] rows of y.
  EXPECT_EQ(static_cast<const char*>(r.calls[fwd[1]].buffers[3]) -
                static_cast<const char*>(r.calls[fwd[0]].buffers[3]),
            8 * 16 * 4);
  // out gains the shared outputs after the combine; dx_acc their dx after the routed dx is back.
  const Call& sum_out = r.only("shared_sum_out");
  EXPECT_TRUE(before(r, "combine_fwd", "shared_sum_out"));
  EXPECT_EQ(sum_out.buffers[0], r.calls[fwd[0]].buffers[3]);
  EXPECT_EQ(sum_out.buffers[1], r.only("combine_fwd").buffers[1]);
  const Call& sum_dx = r.only("shared_sum_dx");
  EXPECT_TRUE(before(r, "unpermute_sum", "shared_sum_dx"));
  EXPECT_TRUE(before(r, "shared_sum_dx", "router_bwd"));
  EXPECT_EQ(sum_dx.buffers[0], r.calls[data[0]].buffers[4]);
  EXPECT_EQ(sum_dx.buffers[1], r.only("unpermute_sum").buffers[1]);
  // Without the overlap everything stays on the main lane.
  EXPECT_TRUE(r.at("fork_side").empty());
  FakeStep none("");
  EXPECT_TRUE(none.step().at("shared_sum_out").empty());
}

TEST(MoeLayerFake, OverlapRunsTheSharedForwardBesideTheDispatch) {
  FakeStep f(R"(, "overlap": "dispatch_bwd")", 1);
  const Recorder& r = f.step();
  const size_t shared_fwd = shared_calls(r, "expert_ffn_fwd").at(0);
  const std::vector<size_t> fork = r.at("fork_side"), main = r.at("to_main"),
                            join = r.at("join_side");
  ASSERT_EQ(fork.size(), 2u);  // the shared forward, then dispatch_bwd
  EXPECT_LT(fork[0], shared_fwd);
  EXPECT_LT(shared_fwd, main[0]);
  EXPECT_LT(main[0], r.at("permute")[0]);
  EXPECT_LT(r.at("permute")[0], join[0]);
  const std::vector<size_t> all_fwd = r.at("expert_ffn_fwd");
  EXPECT_LT(join[0], all_fwd.back());  // the routed experts wait for both
  // Backward: the shared experts on the main lane, beside dispatch_bwd on the side lane.
  const size_t shared_data = shared_calls(r, "expert_ffn_bwd_data").at(0);
  EXPECT_LT(main[1], shared_data);
  EXPECT_LT(shared_calls(r, "expert_ffn_bwd_weights").at(0), join[1]);
  EXPECT_TRUE(before(r, "join_side", "shared_sum_dx"));
}

// overlap pipeline, 2 chunks of 4 tokens: one layout per chunk before any dispatch, each chunk's
// dispatcher on its tokens' rows, its expert-major rows from row 128 on (chunk_rows_begin); the
// weight gradients once, over the chunks' rows gathered after the last data gradients into the
// unchunked step's layout (16 rows, 4 per expert); the router once over all tokens.
TEST(MoeLayerFake, PipelineRunsEachChunkOnItsOwnRows) {
  FakeStep f(R"(, "overlap": "pipeline", "overlap_chunks": 2)");
  const Recorder& r = f.step();
  const size_t token_row = 16 * 4, chunk_tokens = 4;  // H floats; T / 2
  auto bytes_between = [](const void* a, const void* b) {
    return static_cast<const char*>(b) - static_cast<const char*>(a);
  };
  EXPECT_EQ(r.at("router_fwd").size(), 1u);
  EXPECT_EQ(r.at("router_bwd").size(), 1u);
  const std::vector<size_t> layouts = r.at("dispatch_layout"), permutes = r.at("permute"),
                            fwd = r.at("expert_ffn_fwd"), combines = r.at("combine_fwd"),
                            unpermutes = r.at("unpermute_sum"), combine_bwd = r.at("combine_bwd");
  ASSERT_EQ(layouts.size(), 2u);
  ASSERT_EQ(permutes.size(), 2u);
  ASSERT_EQ(fwd.size(), 2u);
  ASSERT_EQ(unpermutes.size(), 2u);
  ASSERT_EQ(combine_bwd.size(), 2u);
  EXPECT_LT(layouts[1], permutes[0]);
  const void* x = r.only("router_fwd").buffers[0];
  EXPECT_EQ(r.calls[permutes[0]].buffers[0], x);
  EXPECT_EQ(bytes_between(x, r.calls[permutes[1]].buffers[0]), chunk_tokens * token_row);
  for (size_t c = 0; c < 2; ++c) {
    const Call& e = r.calls[fwd[c]];
    EXPECT_EQ(e.buffers[0], r.calls[permutes[c]].buffers[1]);          // its xe
    EXPECT_EQ(r.calls[combines[c]].buffers[0], e.buffers[3]);          // its ye
    for (int l = 0; l <= 4; ++l) EXPECT_EQ(e.offsets[l], 2 * l) << l;  // 8 rows, 2 per expert
  }
  EXPECT_EQ(bytes_between(r.calls[fwd[0]].buffers[0], r.calls[fwd[1]].buffers[0]), 128 * token_row);
  EXPECT_EQ(bytes_between(r.calls[combines[0]].buffers[1], r.calls[combines[1]].buffers[1]),
            chunk_tokens * token_row);  // out
  EXPECT_EQ(bytes_between(r.calls[unpermutes[0]].buffers[1], r.calls[unpermutes[1]].buffers[1]),
            chunk_tokens * token_row);  // dx_acc
  EXPECT_EQ(bytes_between(r.calls[combine_bwd[0]].buffers[3], r.calls[combine_bwd[1]].buffers[3]),
            chunk_tokens * 2 * 4);  // dp [T, K]
  const std::vector<size_t> merge = r.at("merge_chunk_layout"), gathers = r.at("gather_chunk_rows"),
                            data = r.at("expert_ffn_bwd_data"),
                            weights_calls = r.at("expert_ffn_bwd_weights");
  ASSERT_EQ(merge.size(), 1u);
  ASSERT_EQ(gathers.size(), 4u);
  ASSERT_EQ(data.size(), 2u);
  ASSERT_EQ(weights_calls.size(), 1u);
  EXPECT_LT(layouts[1], merge[0]);
  EXPECT_LT(merge[0], permutes[0]);
  const size_t weights = weights_calls[0];
  const Call& w = r.calls[weights];
  EXPECT_EQ(bytes_between(r.calls[data[0]].buffers[0], r.calls[data[1]].buffers[0]),
            128 * token_row);  // the chunks' dye
  // Sources: dye, xe, a (the forward's), dh, each from its buffer's first row (chunk 0's).
  const void* sources[4] = {r.calls[data[0]].buffers[0], r.calls[fwd[0]].buffers[0],
                            r.calls[fwd[0]].buffers[2], r.calls[data[0]].buffers[3]};
  for (size_t i = 0; i < 4; ++i) {
    const Call& g = r.calls[gathers[i]];
    EXPECT_LT(data[1], gathers[i]);
    EXPECT_LT(gathers[i], weights);
    EXPECT_EQ(g.buffers[0], sources[i]) << i;
    EXPECT_EQ(w.buffers[i], g.buffers[1]) << i;  // the weight gradients read what it gathered
  }
  // Into buffers the backward is done with: ye (the forward's), da, h; xe into one of its own.
  EXPECT_EQ(r.calls[gathers[0]].buffers[1], r.calls[fwd[0]].buffers[3]);
  EXPECT_EQ(r.calls[gathers[2]].buffers[1], r.calls[data[0]].buffers[2]);
  EXPECT_EQ(r.calls[gathers[3]].buffers[1], r.calls[data[0]].buffers[1]);
  EXPECT_NE(r.calls[gathers[1]].buffers[1], r.calls[data[1]].buffers[4]);  // not dxe: see above
  for (int l = 0; l <= 4; ++l) EXPECT_EQ(w.offsets[l], 4 * l) << l;
}

// Whether the work issued as call `a` must finish before call `b` starts, under the lanes' rules
// (Device::fork_side): in order on one lane; across lanes only through a join (side to main) or
// a fork (main to side) issued between them.
bool waits_for(const Recorder& r, size_t b, size_t a) {
  if (a >= b) return false;
  const int la = r.calls[a].lane, lb = r.calls[b].lane;
  if (la == lb) return true;
  const char* sync = la == kSideLane ? "join_side" : "fork_side";
  for (size_t i = a + 1; i < b; ++i)
    if (r.calls[i].name == sync) return true;
  return false;
}
// Whether the two calls may run at the same time: neither waits for the other.
bool beside(const Recorder& r, size_t a, size_t b) {
  return !waits_for(r, a, b) && !waits_for(r, b, a) && r.calls[a].lane != r.calls[b].lane;
}

// overlap pipeline, 4 chunks at align 16 (regroups) with shared experts: the dispatcher's calls
// on the side lane, every GEMM on the main lane; each chunk's phases wait for what they read, and
// chunk c's GEMMs run beside the previous and next chunks' dispatcher directions.
TEST(MoeLayerFake, PipelineOverlapsTheChunksOnTwoLanes) {
  FakeStep f(R"(, "overlap": "pipeline", "overlap_chunks": 4, "align": 16)", 1);
  const Recorder& r = f.step();
  auto starts = [](const std::string& name, const char* prefix) {
    return name.rfind(prefix, 0) == 0;
  };
  for (const Call& c : r.calls) {
    const bool dispatcher = c.name == "permute" || starts(c.name, "regroup") ||
                            starts(c.name, "combine") || c.name == "unpermute_sum" ||
                            c.name == "alltoallv_rows";
    const bool main = starts(c.name, "expert_ffn") || starts(c.name, "router") ||
                      c.name == "dispatch_layout" || starts(c.name, "shared_sum");
    if (dispatcher || main) {
      EXPECT_EQ(c.lane, dispatcher ? kSideLane : kMainLane) << c.name;
    }
  }
  // The routed experts' calls (the shared expert's take all 8 tokens: offsets[1] == 8).
  auto routed = [&](const std::string& name) {
    std::vector<size_t> out;
    for (size_t i : r.at(name))
      if (r.calls[i].offsets[1] != 8) out.push_back(i);
    return out;
  };
  const std::vector<size_t> permutes = r.at("permute"), combines = r.at("combine_fwd"),
                            combine_bwd = r.at("combine_bwd"), unpermutes = r.at("unpermute_sum");
  const std::vector<size_t> fwd = routed("expert_ffn_fwd"), data = routed("expert_ffn_bwd_data"),
                            weights = routed("expert_ffn_bwd_weights");
  ASSERT_EQ(permutes.size(), 4u);
  ASSERT_EQ(fwd.size(), 4u);
  ASSERT_EQ(data.size(), 4u);
  ASSERT_EQ(weights.size(), 1u);  // once, over every chunk's rows
  ASSERT_EQ(unpermutes.size(), 4u);
  const size_t router_bwd = r.at("router_bwd")[0];
  for (size_t c = 0; c < 4; ++c) {
    SCOPED_TRACE(c);
    // Each permute is followed by a regroup into xe; the GEMMs wait for the last call before them.
    EXPECT_TRUE(waits_for(r, fwd[c], permutes[c] + 1));
    EXPECT_TRUE(waits_for(r, combines[c] - 1, fwd[c]));  // the regroup of ye before the combine
    EXPECT_TRUE(waits_for(r, data[c], combine_bwd[c] + 1));
    EXPECT_TRUE(waits_for(r, unpermutes[c] - 1, data[c]));
    EXPECT_TRUE(waits_for(r, weights[0], data[c]));
    EXPECT_TRUE(waits_for(r, router_bwd, unpermutes[c]));
    if (c + 1 < 4) {
      EXPECT_TRUE(beside(r, permutes[c + 1], fwd[c]));
      EXPECT_TRUE(beside(r, combine_bwd[c + 1], data[c]));
      EXPECT_TRUE(beside(r, unpermutes[c], data[c + 1]));
    }
    if (c > 0) {
      EXPECT_TRUE(beside(r, combines[c - 1], fwd[c]));
    }
  }
  // The shared expert beside the first dispatch and the last dispatch_bwd.
  const size_t shared_fwd = r.at("expert_ffn_fwd")[0];
  ASSERT_EQ(r.calls[shared_fwd].offsets[1], 8);
  EXPECT_TRUE(beside(r, permutes[0], shared_fwd));
  size_t shared_data = 0;
  for (size_t i : r.at("expert_ffn_bwd_data"))
    if (r.calls[i].offsets[1] == 8) shared_data = i;
  EXPECT_TRUE(beside(r, unpermutes[3], shared_data));
  EXPECT_TRUE(beside(r, unpermutes[3], weights[0]));  // the weight gradients beside the last
  EXPECT_TRUE(waits_for(r, r.at("shared_sum_out").at(0), combines[3]));  // out's last rows
}

TEST(MoeLayerFake, ASteadyStepAllocatesNothing) {
  for (const char* sets : {"", R"(, "align": 16)", R"(, "dispatch": "allgather", "align": 16)",
                           R"(, "dispatch": "alltoall_dedup", "align": 16)",
                           R"(, "overlap": "pipeline", "overlap_chunks": 4, "align": 16)",
                           R"(, "overlap": "pipeline", "dispatch": "allgather", "align": 16)",
                           R"(, "overlap": "pipeline", "dispatch": "alltoall_dedup", "align": 16)"})
    for (int64_t shared : {0, 2}) {
      FakeStep f(sets, shared);
      f.step(0);
      const Recorder& r = f.step(1);
      EXPECT_TRUE(r.at("alloc").empty()) << sets << " shared " << shared;
      EXPECT_TRUE(r.at("release").empty()) << sets << " shared " << shared;
    }
}

}  // namespace
}  // namespace moe
