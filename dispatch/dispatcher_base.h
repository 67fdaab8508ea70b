#pragma once
// What every dispatch strategy works with: the step's sizes, this rank's EP position, the
// backend's device, ops and comm, the phases of the caller's timer its collectives are timed as,
// and the device memory it holds for its whole life.
#include "core/dispatcher.h"
#include "dispatch/owned_buffers.h"

namespace moe {

class DispatcherBase : public Dispatcher {
 protected:
  DispatcherBase(const Dims& d, const Mesh& mesh, Device& device, Ops& ops, Comm& comm,
                 PhaseTimer& timer, const DispatchPhases& phases)
      : d_(d),
        ep_rank_(mesh.ep_rank),
        device_(device),
        ops_(ops),
        comm_(comm),
        timer_(timer),
        phases_(phases),
        buffers_(device) {}

  Dims d_;
  int ep_rank_ = 0;
  Device& device_;
  Ops& ops_;
  Comm& comm_;
  PhaseTimer& timer_;
  DispatchPhases phases_;
  OwnedBuffers buffers_;
};

}  // namespace moe
