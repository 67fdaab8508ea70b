#include "app/gemm_choice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace moe {
namespace {

constexpr double kNone = std::numeric_limits<double>::infinity();

ExpertGemmMethods all_by(const std::string& method) {
  ExpertGemmMethods m;
  m.fill(method);
  return m;
}

}  // namespace

GemmMethodChoice::GemmMethodChoice(std::vector<std::string> methods, int64_t warmup)
    : methods_(std::move(methods)), mix_ms_(kNone), base_ms_(kNone), warmup_(warmup) {
  const int64_t n = int64_t(methods_.size());
  best_ms_.assign(size_t(n), kNone);
  ExpertGemmMs none;
  none.fill(kNone);
  best_gemm_ms_.assign(size_t(n), none);
  if (n < 2) return;
  // One try each cannot be fair (see input_step): two each, and two each of the mix and the base
  // side by side. The earliest warm-up steps pay one-off costs (first allocations): tries come
  // last.
  added_ = std::max<int64_t>(0, 2 * n + 4 - warmup);
  first_try_ = tries_end() - (2 * n + 4);
}

int64_t GemmMethodChoice::input_step(int64_t s) const {
  if (!active() || s < first_try_) return s;
  // The choice's own warm-up draws the inputs of warm-up steps 0, 1, ..., and the timed steps
  // those after them.
  return s < tries_end() ? first_try_ : s - tries_end();
}

bool GemmMethodChoice::times_gemms(int64_t s) const {
  return active() && s >= first_try_ && s < first_try_ + 2 * int64_t(methods_.size());
}

std::optional<ExpertGemmMethods> GemmMethodChoice::methods_for_step(int64_t s) const {
  if (!active() || s < first_try_ || s > tries_end()) return std::nullopt;
  if (s == tries_end()) return choice();  // set once, before its own warm-up
  const int64_t k = s - first_try_, n = int64_t(methods_.size());
  if (k < 2 * n) return all_by(methods_[size_t(k % n)]);
  return (k - 2 * n) % 2 == 0 ? mix() : all_by(methods_[base()]);
}

void GemmMethodChoice::record(int64_t s, double experts_ms, const ExpertGemmMs& gemm_ms) {
  if (!active() || s < first_try_ || s >= tries_end()) return;
  const int64_t k = s - first_try_, n = int64_t(methods_.size());
  const double ms = std::isfinite(experts_ms) ? experts_ms : kNone;
  if (k >= 2 * n) {
    double& best = (k - 2 * n) % 2 == 0 ? mix_ms_ : base_ms_;
    best = std::min(best, ms);
    return;
  }
  const size_t i = size_t(k % n);
  best_ms_[i] = std::min(best_ms_[i], ms);
  for (size_t g = 0; g < size_t(kNumExpertGemms); ++g)
    if (std::isfinite(gemm_ms[g])) best_gemm_ms_[i][g] = std::min(best_gemm_ms_[i][g], gemm_ms[g]);
}

size_t GemmMethodChoice::base() const {
  // The first of equal times.
  return size_t(std::min_element(best_ms_.begin(), best_ms_.end()) - best_ms_.begin());
}

ExpertGemmMethods GemmMethodChoice::mix() const {
  const size_t b = base();
  ExpertGemmMethods m = all_by(methods_[b]);
  for (size_t g = 0; g < size_t(kNumExpertGemms); ++g) {
    double fastest = best_gemm_ms_[b][g] * (1.0 - kSwitchMargin);
    for (size_t i = 0; i < methods_.size(); ++i)
      if (best_gemm_ms_[i][g] < fastest) {
        fastest = best_gemm_ms_[i][g];
        m[g] = methods_[i];
      }
  }
  return m;
}

bool GemmMethodChoice::mixed() const { return active() && mix() != all_by(methods_[base()]); }

ExpertGemmMethods GemmMethodChoice::choice() const {
  if (!active()) return all_by("");
  return mixed() && mix_ms_ < base_ms_ ? mix() : all_by(methods_[base()]);
}

std::string GemmMethodChoice::choice_name() const { return expert_gemm_methods_name(choice()); }

std::map<std::string, double> GemmMethodChoice::tries_ms() const {
  std::map<std::string, double> tries;
  if (active())
    for (size_t i = 0; i < methods_.size(); ++i) tries[methods_[i]] = best_ms_[i];
  return tries;
}

std::map<std::string, std::map<std::string, double>> GemmMethodChoice::gemm_tries_ms() const {
  std::map<std::string, std::map<std::string, double>> tries;
  if (!active()) return tries;
  for (size_t i = 0; i < methods_.size(); ++i)
    for (size_t g = 0; g < size_t(kNumExpertGemms); ++g)
      tries[methods_[i]][kExpertGemmNames[g]] = best_gemm_ms_[i][g];
  return tries;
}

PerGemmTry GemmMethodChoice::per_gemm_try() const {
  PerGemmTry t;
  if (!active()) return t;
  t.tried = mixed();
  t.methods = mix();
  t.against = methods_[base()];
  t.ms = mix_ms_;
  t.against_ms = base_ms_;
  return t;
}

std::string GemmMethodChoice::summary() const {
  if (!active()) return "";
  std::string s = choice_name() + " (chosen in warm-up:";
  char buf[128];
  for (size_t i = 0; i < methods_.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%s %s %.2f ms", i ? "," : "", methods_[i].c_str(),
                  best_ms_[i]);
    s += buf;
  }
  s += " experts fwd+bwd; ";
  if (!mixed()) {
    std::snprintf(buf, sizeof(buf), "no GEMM %.0f%% faster on another method)",
                  100 * kSwitchMargin);
    return s + buf;
  }
  const ExpertGemmMethods m = mix();
  s += kPerGemmMethods;
  for (size_t g = 0; g < size_t(kNumExpertGemms); ++g)
    s += std::string(g ? ", " : " (") + kExpertGemmNames[g] + " " + m[g];
  std::snprintf(buf, sizeof(buf), ") %.2f ms against %s %.2f ms in alternate steps)", mix_ms_,
                methods_[base()].c_str(), base_ms_);
  return s + buf;
}

}  // namespace moe
