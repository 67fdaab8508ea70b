#pragma once
// A MoeLayer over the CPU backend on the test binary's world (one rank), at its mesh: for tests of
// what whole steps hold and compute.
#include <mpi.h>

#include <vector>

#include "comm/mpi_comm.h"
#include "core/mesh.h"
#include "core/moe_layer.h"
#include "core/reference.h"
#include "core/workload.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/cpu_ops.h"

namespace moe::test {

struct CpuLayer {
  explicit CpuLayer(const Workload& w)
      : mesh(make_mesh(1, 0, w.mesh.ep, w.mesh.fsdp, w.model.experts)),
        device(w.dtype),
        ops(device),
        comm(MPI_COMM_WORLD, mesh),
        layer(w, mesh, device, ops, comm) {}
  // Steps 0 to steps - 1; the last one's results stay in the layer.
  void run(int64_t steps) {
    std::vector<double> ms;
    for (int64_t step = 0; step < steps; ++step) {
      layer.load_step_inputs(step);
      layer.run_step(ms);
    }
  }

  Mesh mesh;
  CpuDevice device;
  CpuOps ops;
  MpiComm comm;
  MoeLayer layer;
};

// The float64 reference of one rank's step `step` whose results are o (the backend's routing
// and drops adopted at near ties only).
inline ReferenceResult reference_of_step(const Workload& w, const StepOutputs& o, int64_t step) {
  const Mesh mesh = make_mesh(1, 0, 1, 1, w.model.experts);
  return compute_reference(w, mesh, MPI_COMM_WORLD, reference_inputs(o, step));
}

}  // namespace moe::test
