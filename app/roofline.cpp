#include "app/roofline.h"

#include <algorithm>
#include <map>

namespace moe {

double apply_floors(const Calibration& c, int world, std::vector<PhaseResult>& phases) {
  if (!c.done) return 0;
  std::map<std::string, double> own;
  for (PhaseResult& p : phases) {
    p.floor_ms = 0;
    p.floor_bound.clear();
    auto bound_by = [&p](double ms, const char* what) {
      if (ms > p.floor_ms) {
        p.floor_ms = ms;
        p.floor_bound = what;
      }
    };
    const double tflops = p.fp8 && c.fp8_gemm_tflops > 0 ? c.fp8_gemm_tflops : c.gemm_tflops;
    if (p.flops > 0 && tflops > 0) bound_by(p.flops / world / (tflops * 1e9), "compute");
    if (p.mem_bytes > 0 && c.mem_gbps > 0) bound_by(p.mem_bytes / (c.mem_gbps * 1e6), "memory");
    // Only the all-to-all itself: the bytes of counts_exchange are latency, not bandwidth.
    if (p.name.rfind("a2a_", 0) == 0 && p.bytes > 0 && c.has_a2a())
      bound_by(p.bytes / (c.a2a_algbw_gbps * 1e6), "network");
    own[p.name] = p.floor_ms;
  }
  // A phase that holds an all-to-all (dispatch_fwd holds a2a_dispatch_fwd) is bound by it.
  for (PhaseResult& p : phases) {
    if (!p.in_step || p.floor_ms > 0) continue;
    auto part = own.find("a2a_" + p.name);
    if (part != own.end() && part->second > 0) {
      p.floor_ms = part->second;
      p.floor_bound = "network";
    }
    own[p.name] = p.floor_ms;
  }
  // Phases run beside another (on the other lane) add only what their floors together exceed
  // the other's by: the pipeline runs both dispatcher directions of a pass beside its experts.
  double step = 0;
  std::map<std::string, double> beside;
  for (const PhaseResult& p : phases) {
    if (!p.in_step) continue;
    if (p.beside.empty())
      step += p.floor_ms;
    else
      beside[p.beside] += p.floor_ms;
  }
  for (const auto& [other, floor_ms] : beside) step += std::max(0.0, floor_ms - own[other]);
  return step;
}

}  // namespace moe
