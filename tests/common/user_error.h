#pragma once
// The message of the UserError fn throws, or "(no UserError)": for tests of refusals.
#include <functional>
#include <string>

#include "core/error.h"

namespace moe::test {

inline std::string user_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no UserError)";
}

}  // namespace moe::test
