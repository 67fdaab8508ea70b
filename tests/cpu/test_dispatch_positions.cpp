// The dispatchers that place rows themselves (allgather, alltoall_dedup, nvlink) index every row
// their EP group may route to a rank in int32: a group too large for that is refused when the
// dispatcher is built, naming the dispatcher and the fix, before it allocates or opens a window
// (so this 1-rank world may plan an EP group of 2 with 2^28 tokens a rank and hold none of it).
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <string>

#include "comm/mpi_comm.h"
#include "core/dispatcher.h"
#include "core/ops.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/cpu_ops.h"
#include "tests/common/user_error.h"

namespace moe {
namespace {

TEST(DispatchPositions, TooManyRowsForInt32AreRefusedByName) {
  const Mesh one = make_mesh(1, 0, 1, 1, 8);
  CpuDevice device(DType::kBf16);
  CpuOps ops(device);
  MpiComm comm(MPI_COMM_WORLD, one);
  std::unique_ptr<PhaseTimer> timer = device.make_timer({"p"});
  // EP rank 0 of 2: 2 x 2^28 tokens x K 8 rows may reach it, past 2^31.
  Mesh mesh = one;
  mesh.ep = 2;
  Dims d;
  d.T = int64_t(1) << 28, d.H = 64, d.F = 32, d.E = 8, d.K = 8, d.E_local = 4, d.ep = 2;
  d.world = 2, d.N = 2 * d.T, d.align = 3;  // 4 local experts x 2 padding rows more
  for (DispatchKind k :
       {DispatchKind::kAllgather, DispatchKind::kAlltoallDedup, DispatchKind::kNvlink}) {
    Workload w;
    w.dispatch = k;
    w.tokens_per_rank = d.T;
    w.model.experts = d.E;
    w.model.topk = d.K;
    w.mesh.ep = 2;
    const std::string msg = test::user_error_of(
        [&] { make_dispatcher(w, mesh, d, device, ops, comm, *timer, DispatchPhases{}); });
    SCOPED_TRACE(name_of(k));
    EXPECT_NE(msg.find(std::string("dispatch = ") + name_of(k) +
                       ": up to 4294967304 "
                       "expert-major rows per rank"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("overflow int32 positions: lower tokens_per_rank"), std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace moe
