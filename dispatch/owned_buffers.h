#pragma once
// Device memory a dispatcher holds for its whole life: allocated at set-up (zero-filled, as every
// Device allocation is), released together when the dispatcher goes.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/device.h"

namespace moe {

class OwnedBuffers {
 public:
  explicit OwnedBuffers(Device& device) : device_(device) {}
  ~OwnedBuffers() {
    for (void* p : owned_) device_.release(p);
  }
  OwnedBuffers(const OwnedBuffers&) = delete;
  OwnedBuffers& operator=(const OwnedBuffers&) = delete;

  // `bytes` of device memory as T (at least one byte, so that an empty tensor has an address).
  template <class T = void>
  T* alloc(size_t bytes) {
    void* p = device_.alloc(std::max<size_t>(bytes, 1));
    owned_.push_back(p);
    return static_cast<T*>(p);
  }

 private:
  Device& device_;
  std::vector<void*> owned_;
};

}  // namespace moe
