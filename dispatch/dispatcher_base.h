#pragma once
// What every dispatch strategy works with: the step's sizes, this rank's EP position, the
// backend's device, ops and comm, the phases of the caller's timer its collectives are timed as,
// and the device memory it holds for its whole life.
#include <cstdint>
#include <limits>

#include "core/dispatcher.h"
#include "core/error.h"
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
        buffers_(device),
        dispatched_(dispatched_rows(d, device.storage_bytes())) {}

  // The rows dispatch_fwd moves, as Dims for the ops' row copies (permute, regroup, padding):
  // d itself, or with dispatch_fp8 packed FP8 rows, which those copies move bit for bit as
  // fp8_row_bytes(H) bytes' worth of storage elements.
  static Dims dispatched_rows(const Dims& d, size_t storage_bytes) {
    if (!d.dispatch_fp8) return d;
    const size_t bytes = dispatch_row_bytes(d.H, true, storage_bytes);
    MOE_CHECK(bytes % storage_bytes == 0,
              "FP8 rows of " << bytes << " bytes in elements of " << storage_bytes);
    Dims r = d;
    r.H = int64_t(bytes / storage_bytes);
    return r;
  }
  size_t dispatched_row_bytes() const { return device_.storage_bytes() * size_t(dispatched_.H); }

  // The dispatchers that place rows themselves index every row the EP group may route here, and
  // each expert's padding, in int32 (as the layout's send positions are): a user error past that,
  // naming `fix`.
  void check_int32_positions(const char* fix) const {
    const int64_t max_rows = d_.ep * d_.T * d_.K + d_.E_local * (d_.align - 1);
    MOE_USER_CHECK(max_rows <= std::numeric_limits<int32_t>::max(),
                   "dispatch = " << name() << ": up to " << max_rows
                                 << " expert-major rows per rank (mesh.ep x tokens_per_rank x "
                                    "model.topk) overflow int32 positions: "
                                 << fix);
  }

  Dims d_;
  int ep_rank_ = 0;
  Device& device_;
  Ops& ops_;
  Comm& comm_;
  PhaseTimer& timer_;
  DispatchPhases phases_;
  OwnedBuffers buffers_;
  Dims dispatched_;
};

}  // namespace moe
