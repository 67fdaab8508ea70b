// The CUDA twin of tests/cpu/test_buffer_plan.cpp: a MoeLayer over the CUDA backend (one GPU, one
// rank), after steps with balanced routing, has allocated exactly the bytes the memory estimate
// predicts for it (the CUDA device counts every allocation it makes), FP8's codes and scratch and
// the router and layout kernels' scratch included, so that --dry-run and the run's refusal before
// allocating cannot drift from the code. One known difference, computed here from its formula:
// without graphs FP8's scratch is sized for the rows the step has, which the estimate bounds by the
// planned rows.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "comm/nccl_comm.h"
#include "core/buffer_plan.h"
#include "core/fp8_buffers.h"
#include "core/mesh.h"
#include "core/moe_layer.h"
#include "core/workload.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace moe {
namespace {

// Bytes the CUDA device held at most over the layer's construction and three steps (the first
// two are the warm-up a sync-free step captures after).
int64_t bytes_a_cuda_step_holds(const Workload& w) {
  const Mesh mesh = make_mesh(1, 0, w.mesh.ep, w.mesh.fsdp, w.model.experts);
  CudaDevice device(0, w.dtype);
  CudaOps ops(device, w.gemm, w.graph, w.precision);
  NcclComm comm(MPI_COMM_WORLD, mesh, device, 60.0);
  MoeLayer layer(w, mesh, device, ops, comm);
  std::vector<double> ms;
  for (int64_t step = 0; step < 3; ++step) {
    layer.load_step_inputs(step);
    layer.run_step(ms);
  }
  device.sync();
  return device.memory_high_water();
}

// 64 tokens x top 2 over 8 experts: 16 rows each, a multiple of align 16, so the ragged buffers
// hold what the plan sizes for balanced routing. sets: --set assignments on top.
Workload balanced(const std::vector<std::string>& sets) {
  Workload w = workload_from_json_text(
      R"({"model": {"hidden": 256, "ffn": 128, "experts": 8, "topk": 2}, "tokens_per_rank": 64,
          "align": 16, "routing": {"mode": "balanced"}, "check": "off", "roofline": false,
          "warmup": 2})",
      "t");
  for (const std::string& s : sets) apply_override(w, s);
  resolve_and_validate(w, 1);
  return w;
}

int64_t cuda_estimate(const Workload& w) {
  const int storage = w.dtype == DType::kBf16 ? 2 : 4;
  const int grad = w.expert_grad_dtype == DType::kBf16 ? 2 : 4;
  return estimate_step_memory(w, 1, storage, grad, /*cuda=*/true).total();
}

TEST(BufferPlanCuda, EstimateIsWhatTheStepAllocates) {
  MOE_REQUIRE_SM90();
  const std::string sm90 = "gemm.method=grouped_sm90";
  for (const std::vector<std::string>& sets : std::vector<std::vector<std::string>>{
           {"gemm.method=lt_multistream"},
           {sm90, "expert_grad_dtype=bf16"},
           {sm90, "graph=true"},
           {sm90, "dispatch=alltoall_dedup"},
           {sm90, "overlap=pipeline", "overlap_chunks=2"},
           {sm90, "model.shared_experts=1", "model.shared_ffn=128"},
           {sm90, "precision=fp8_tensor"},
           {"gemm.method=lt_multistream", "precision=fp8_tensor", "overlap=pipeline",
            "overlap_chunks=2"},
           {sm90, "precision=fp8_tensor", "model.shared_experts=2", "model.shared_ffn=128"},
           {sm90, "precision=fp8_block"},
           {"gemm.method=lt_multistream", "precision=fp8_block", "fp8_weights=cached"},
           {sm90, "precision=fp8_block", "dispatch_dtype=fp8", "graph=true"}}) {
    std::string what;
    for (const std::string& s : sets) what += " " + s;
    SCOPED_TRACE(what);
    const Workload w = balanced(sets);
    int64_t expected = cuda_estimate(w);
    if (!w.graph) {
      // Balanced routing at align 16: the step's rows are T K, each expert's a multiple of 16.
      const int64_t planned = plan_step_buffers(w, 2, 4).planned_rows;
      const int64_t rows = w.tokens_per_rank * w.model.topk;
      expected += cuda_fp8_step_bytes(w, rows) - cuda_fp8_step_bytes(w, planned);
    }
    EXPECT_EQ(bytes_a_cuda_step_holds(w), expected);
  }
}

}  // namespace
}  // namespace moe
