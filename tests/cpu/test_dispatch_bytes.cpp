// The dispatchers' predicted bytes against each other (core/dispatcher.h DispatchBytes), on
// published models' routing shapes: alltoall_dedup never sends more rows than alltoall (one per
// rank reached, at most min(K, ep) a token, against K), only its metadata more; it moves fewer
// bytes than allgather; and at ep 1 every kind is alltoall.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/dispatcher.h"
#include "core/mesh.h"
#include "core/workload.h"

namespace moe {
namespace {

Workload model(int64_t E, int64_t K, int64_t G, int64_t Gk, const std::string& dispatch) {
  Workload w = workload_from_json_text(
      R"({"model": {"hidden": 4096, "ffn": 1024, "experts": )" + std::to_string(E) +
          R"(, "topk": )" + std::to_string(K) + R"(}, "router": {"groups": )" + std::to_string(G) +
          R"(, "group_topk": )" + std::to_string(Gk) +
          R"(}, "tokens_per_rank": 4096, "dispatch": ")" + dispatch + R"("})",
      "t");
  return w;
}

TEST(DispatchBytes, DedupSendsNoMoreRowsThanAlltoallAndFewerBytesThanAllgather) {
  struct Shape {
    int64_t E, K, G, Gk;
  };
  // DeepSeek-V3, Qwen3-30B-A3B, Mixtral.
  for (const Shape s : {Shape{256, 8, 8, 4}, Shape{128, 8, 1, 1}, Shape{8, 2, 1, 1}})
    for (int64_t ep : {1, 2, 4, 8}) {
      SCOPED_TRACE("E " + std::to_string(s.E) + " K " + std::to_string(s.K) + " ep " +
                   std::to_string(ep));
      const Mesh m = make_mesh(int(ep), 0, ep, 1, s.E);
      const double rows = 4096.0 * double(s.K);
      auto bytes = [&](const char* d) {
        Workload w = model(s.E, s.K, s.G, s.Gk, d);
        w.mesh.ep = ep;
        w.mesh.fsdp = 1;
        return dispatch_bytes_for_rows(w, m, 2, rows);
      };
      const DispatchBytes a2a = bytes("alltoall"), dedup = bytes("alltoall_dedup"),
                          ag = bytes("allgather");
      if (ep == 1) {
        for (int dir = 0; dir < kNumDirs; ++dir) EXPECT_EQ(dedup.direction[dir], 0);
        EXPECT_EQ(dedup.per_step(), a2a.per_step());
        continue;
      }
      const double most = double(std::min(s.K, ep)) * double(ep - 1) / double(ep);
      EXPECT_GT(dedup.rows_per_token_to_others, 0);
      EXPECT_LE(dedup.rows_per_token_to_others, most + 1e-12);
      EXPECT_LE(dedup.rows_per_token_to_others, a2a.rows_per_token_to_others + 1e-12);
      for (int dir : {kDirCombineFwd, kDirCombineBwd, kDirDispatchBwd})
        EXPECT_LE(dedup.direction[dir], a2a.direction[dir] * (1 + 1e-12)) << dir;
      // The metadata: K int32 slots and K fp32 weights a wire row, and dp's K fp32 back.
      const double wire = dedup.direction[kDirCombineFwd] / (4096.0 * 2);
      EXPECT_DOUBLE_EQ(dedup.direction[kDirDispatchFwd], wire * (4096.0 * 2 + 8 * s.K));
      EXPECT_DOUBLE_EQ(dedup.other, wire * 4 * s.K);
      EXPECT_LT(dedup.per_step(), ag.per_step());
    }
}

// At ep 1 every dispatch kind runs alltoall's local path (dispatch/registry.cpp): its predicted
// bytes and its buffers are alltoall's, field for field, whatever the kind's own formulas say.
TEST(DispatchBytes, EveryKindAtEp1IsAlltoalls) {
  for (const char* d : {"allgather", "alltoall_dedup", "nvlink"})
    for (int64_t align : {1, 16}) {
      SCOPED_TRACE(std::string(d) + " align " + std::to_string(align));
      const Mesh m = make_mesh(1, 0, 1, 1, 256);
      auto plan = [&](const char* kind) {
        Workload w = model(256, 8, 8, 4, kind);
        w.mesh.ep = 1;
        w.mesh.fsdp = 1;
        w.align = align;
        return std::make_pair(dispatch_bytes_for_rows(w, m, 2, 4096.0 * 8),
                              dispatch_buffer_bytes(w, 2));
      };
      const auto [got, got_buffers] = plan(d);
      const auto [want, want_buffers] = plan("alltoall");
      for (int dir = 0; dir < kNumDirs; ++dir) EXPECT_EQ(got.direction[dir], want.direction[dir]);
      EXPECT_EQ(got.layout, want.layout);
      EXPECT_GT(got.layout, 0);  // alltoall's counts exchange, which no other kind predicts at ep 1
      EXPECT_EQ(got.other, want.other);
      EXPECT_EQ(got.collectives_per_step, want.collectives_per_step);
      EXPECT_EQ(got_buffers, want_buffers);
    }
}

// dispatch_dtype fp8: only the dispatch direction's rows shrink, to the packed row's bytes (codes
// and scales, DeepSeek-V3's 7168 wide: 7392 bytes against 14336), on every dispatcher.
TEST(DispatchBytes, Fp8RowsShrinkTheDispatchDirectionOnly) {
  for (const char* d : {"alltoall", "alltoall_dedup", "allgather"}) {
    SCOPED_TRACE(d);
    Workload w = model(256, 8, 8, 4, d);
    w.model.hidden = 7168;
    w.mesh.ep = 8;
    w.mesh.fsdp = 1;
    const Mesh m = make_mesh(8, 0, 8, 1, 256);
    const DispatchBytes bf16 = dispatch_bytes_for_rows(w, m, 2, 4096.0 * 8);
    w.precision = Precision::kFp8Block;
    w.dispatch_dtype = DispatchDtype::kFp8;
    const DispatchBytes fp8 = dispatch_bytes_for_rows(w, m, 2, 4096.0 * 8);
    for (int dir : {kDirCombineFwd, kDirCombineBwd, kDirDispatchBwd})
      EXPECT_EQ(fp8.direction[dir], bf16.direction[dir]) << dir;
    EXPECT_EQ(fp8.layout, bf16.layout);
    EXPECT_EQ(fp8.other, bf16.other);
    // The rows' bytes (dedup's metadata, 64 bytes a wire row, stays).
    const double meta = std::string(d) == "alltoall_dedup"
                            ? 64.0 * bf16.direction[kDirCombineFwd] / (7168.0 * 2)
                            : 0.0;
    EXPECT_DOUBLE_EQ(
        (fp8.direction[kDirDispatchFwd] - meta) / (bf16.direction[kDirDispatchFwd] - meta),
        7392.0 / 14336.0);
  }
}

}  // namespace
}  // namespace moe
