#include "app/gemm_choice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace moe {

GemmMethodChoice::GemmMethodChoice(std::vector<std::string> methods, int64_t warmup)
    : methods_(std::move(methods)), warmup_(warmup) {
  const int64_t n = int64_t(methods_.size());
  best_ms_.assign(n, std::numeric_limits<double>::infinity());
  if (n < 2) return;
  // One try each cannot be fair (see input_step): two each. The earliest warm-up steps pay
  // one-off costs (first allocations): tries come last.
  added_ = std::max<int64_t>(0, 2 * n - warmup);
  first_try_ = untimed_steps() - 2 * n;
}

int64_t GemmMethodChoice::input_step(int64_t s) const {
  if (!active() || s < first_try_) return s;
  return s < untimed_steps() ? first_try_ : s - added_;
}

std::string GemmMethodChoice::method_for_step(int64_t s) const {
  if (!active() || s < first_try_) return "";
  if (s >= untimed_steps()) return s == untimed_steps() ? winner() : "";  // set once
  return methods_[size_t((s - first_try_) % int64_t(methods_.size()))];
}

void GemmMethodChoice::record(int64_t s, double experts_ms) {
  if (!active() || s < first_try_ || s >= untimed_steps()) return;
  double& best = best_ms_[size_t((s - first_try_) % int64_t(methods_.size()))];
  if (std::isfinite(experts_ms)) best = std::min(best, experts_ms);
}

std::string GemmMethodChoice::winner() const {
  if (!active()) return "";
  const size_t i = size_t(std::min_element(best_ms_.begin(), best_ms_.end()) - best_ms_.begin());
  return methods_[i];
}

std::map<std::string, double> GemmMethodChoice::tries_ms() const {
  std::map<std::string, double> tries;
  if (active())
    for (size_t i = 0; i < methods_.size(); ++i) tries[methods_[i]] = best_ms_[i];
  return tries;
}

std::string GemmMethodChoice::summary() const {
  if (!active()) return "";
  std::string s = winner() + " (chosen in warm-up:";
  char buf[96];
  for (size_t i = 0; i < methods_.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%s %s %.2f ms", i ? "," : "", methods_[i].c_str(),
                  best_ms_[i]);
    s += buf;
  }
  return s + " experts fwd+bwd)";
}

}  // namespace moe
