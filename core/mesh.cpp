#include "core/mesh.h"

#include "core/error.h"

namespace moe {

Mesh make_mesh(int world, int rank, int64_t ep, int64_t fsdp, int64_t experts) {
  MOE_CHECK(ep > 0 && fsdp > 0 && ep * fsdp == world,
            "ep " << ep << " x fsdp " << fsdp << " must equal world " << world);
  MOE_CHECK(rank >= 0 && rank < world, "rank " << rank << " outside world of " << world);
  MOE_CHECK(experts > 0, "experts must be positive, got " << experts);
  MOE_CHECK(experts % ep == 0, "experts " << experts << " not divisible by ep " << ep);
  Mesh m;
  m.world = world;
  m.rank = rank;
  m.ep = int(ep);
  m.fsdp = int(fsdp);
  m.ep_rank = rank % m.ep;
  m.fsdp_rank = rank / m.ep;
  m.experts = experts;
  m.experts_per_rank = experts / ep;
  m.experts_begin = m.ep_rank * m.experts_per_rank;
  m.experts_end = m.experts_begin + m.experts_per_rank;
  return m;
}

}  // namespace moe
