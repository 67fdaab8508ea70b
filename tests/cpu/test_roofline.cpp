// Floors and efficiencies from a synthetic calibration: compute phases at the GEMM rate, the
// all-to-alls at the calibrated algbw, the phases that hold an all-to-all bound by it, none at
// ep 1 or with the calibration off; and the keys the result JSON carries for them.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "app/report.h"
#include "app/roofline.h"

namespace moe {
namespace {

PhaseResult phase(const std::string& name, double median_ms, bool in_step, double flops = 0,
                  double bytes = 0) {
  PhaseResult p;
  p.name = name;
  p.ms.median = median_ms;
  p.ms.count = 1;
  p.in_step = in_step;
  p.flops = flops;
  p.bytes = bytes;
  return p;
}

// 2 ranks; 100 TFLOP/s and 50 GB/s algbw: experts_fwd does 2e9 FLOPs per rank (0.02 ms at the
// rate), each all-to-all moves 1e6 bytes per rank (0.02 ms at the algbw).
std::vector<PhaseResult> phases() {
  return {phase("fsdp_gather", 0.5, true),
          phase("experts_fwd", 0.04, true, 4e9),
          phase("dispatch_fwd", 0.1, true),
          phase("layout", 0.3, true),
          phase("counts_exchange", 0.2, false, 0, 64),
          phase("a2a_dispatch_fwd", 0.08, false, 0, 1e6)};
}

Calibration calibration(int ep) {
  Calibration c;
  c.done = true;
  c.gemm_tflops = 100;
  c.gemm_m = c.gemm_n = c.gemm_k = 8192;
  c.dtype = "bf16";
  c.ep = ep;
  if (ep > 1) {
    c.a2a_algbw_gbps = 50;
    c.a2a_busbw_gbps = 25;
    c.a2a_bytes_per_rank = 1 << 28;
  }
  return c;
}

double floor_of(const std::vector<PhaseResult>& ps, const std::string& name) {
  for (const PhaseResult& p : ps)
    if (p.name == name) return p.floor_ms;
  ADD_FAILURE() << "no phase " << name;
  return -1;
}

TEST(Roofline, FloorsFromTheCalibration) {
  std::vector<PhaseResult> ps = phases();
  const double step = apply_floors(calibration(2), 2, ps);
  EXPECT_DOUBLE_EQ(floor_of(ps, "experts_fwd"), 0.02);
  EXPECT_DOUBLE_EQ(floor_of(ps, "a2a_dispatch_fwd"), 0.02);
  EXPECT_DOUBLE_EQ(floor_of(ps, "dispatch_fwd"), 0.02);  // bound by its all-to-all
  EXPECT_EQ(floor_of(ps, "fsdp_gather"), 0.0);
  EXPECT_EQ(floor_of(ps, "layout"), 0.0);
  EXPECT_EQ(floor_of(ps, "counts_exchange"), 0.0);
  // The in-step phases only: a2a_dispatch_fwd is inside dispatch_fwd.
  EXPECT_DOUBLE_EQ(step, 0.04);
}

// 100 GB/s of memory: 1e6 bytes is 0.01 ms, under experts_fwd's 0.02 ms of FLOPs; 4e6 bytes is
// 0.04 ms, over it. The larger sets the floor and names its bound.
TEST(Roofline, MemoryBytesBoundWhenTheyTakeLonger) {
  Calibration c = calibration(2);
  c.mem_gbps = 100;
  for (double bytes : {1e6, 4e6}) {
    std::vector<PhaseResult> ps = phases();
    ps[1].mem_bytes = bytes;  // experts_fwd
    apply_floors(c, 2, ps);
    EXPECT_DOUBLE_EQ(floor_of(ps, "experts_fwd"), bytes == 1e6 ? 0.02 : 0.04);
    EXPECT_EQ(ps[1].floor_bound, bytes == 1e6 ? "compute" : "memory");
    EXPECT_EQ(ps[2].floor_bound, "network");  // dispatch_fwd, by its all-to-all
    EXPECT_EQ(ps[3].floor_bound, "");         // layout: no floor
  }
}

// An FP8 phase's compute floor takes the calibrated FP8 rate (250 TFLOP/s: experts_fwd's 0.02 ms
// of FLOPs at 100 become 0.008 ms); a bf16 one keeps the storage dtype's; without an FP8 rate (a
// backend that has none) the FP8 phase falls back to it.
TEST(Roofline, Fp8PhasesTakeTheFp8Rate) {
  Calibration c = calibration(2);
  c.fp8_gemm_tflops = 250;
  c.fp8_precision = "fp8_tensor";
  std::vector<PhaseResult> ps = phases();
  ps[1].fp8 = true;  // experts_fwd
  apply_floors(c, 2, ps);
  EXPECT_DOUBLE_EQ(floor_of(ps, "experts_fwd"), 0.008);
  ps[1].fp8 = false;
  apply_floors(c, 2, ps);
  EXPECT_DOUBLE_EQ(floor_of(ps, "experts_fwd"), 0.02);
  ps[1].fp8 = true;
  c.fp8_gemm_tflops = 0;
  apply_floors(c, 2, ps);
  EXPECT_DOUBLE_EQ(floor_of(ps, "experts_fwd"), 0.02);
}

// dispatch_bwd beside experts_bwd (the overlap key): the step's floor counts the larger of the two.
TEST(Roofline, APhaseBesideAnotherAddsOnlyItsExcess) {
  for (double a2a_bytes : {1e6, 4e6}) {  // dispatch_bwd's floor 0.02 ms, then 0.08 ms
    std::vector<PhaseResult> ps = {phase("experts_bwd", 0.1, true, 8e9),  // floor 0.04 ms
                                   phase("dispatch_bwd", 0.05, true),
                                   phase("a2a_dispatch_bwd", 0.03, false, 0, a2a_bytes)};
    const double alone = apply_floors(calibration(2), 2, ps);
    EXPECT_DOUBLE_EQ(alone, 0.04 + a2a_bytes / 50e6);
    ps[1].beside = "experts_bwd";
    const double beside = apply_floors(calibration(2), 2, ps);
    EXPECT_DOUBLE_EQ(beside, std::max(0.04, a2a_bytes / 50e6)) << a2a_bytes;
    EXPECT_DOUBLE_EQ(floor_of(ps, "dispatch_bwd"), a2a_bytes / 50e6);  // its own floor stays
  }
}

// overlap pipeline: both directions of a pass beside its experts. Their floors add up before they
// are set against the experts': the lanes run them one after another.
TEST(Roofline, PhasesBesideOneAnotherAddUpAgainstIt) {
  std::vector<PhaseResult> ps = {phase("experts_fwd", 0.1, true, 8e9),  // floor 0.04 ms
                                 phase("dispatch_fwd", 0.05, true),
                                 phase("combine_fwd", 0.05, true),
                                 phase("a2a_dispatch_fwd", 0.03, false, 0, 1.5e6),  // 0.03 ms
                                 phase("a2a_combine_fwd", 0.03, false, 0, 1.5e6)};
  ps[1].beside = ps[2].beside = "experts_fwd";
  EXPECT_DOUBLE_EQ(apply_floors(calibration(2), 2, ps), 0.06);  // max(0.04, 0.03 + 0.03)
  ps[3].bytes = ps[4].bytes = 0.5e6;                            // 0.01 ms each: hidden
  EXPECT_DOUBLE_EQ(apply_floors(calibration(2), 2, ps), 0.04);
}

TEST(Roofline, NoAllToAllFloorAtEpOne) {
  std::vector<PhaseResult> ps = phases();
  const double step = apply_floors(calibration(1), 2, ps);
  EXPECT_EQ(floor_of(ps, "a2a_dispatch_fwd"), 0.0);
  EXPECT_EQ(floor_of(ps, "dispatch_fwd"), 0.0);
  EXPECT_DOUBLE_EQ(step, 0.02);
}

TEST(Roofline, NothingWhenTheCalibrationIsOff) {
  std::vector<PhaseResult> ps = phases();
  EXPECT_EQ(apply_floors(Calibration{}, 2, ps), 0.0);
  for (const PhaseResult& p : ps) EXPECT_EQ(p.floor_ms, 0.0) << p.name;
}

RunResult run_result(const Calibration& c) {
  RunResult r;
  r.backend = "cpu";
  r.mesh.world = 2;
  r.mesh.ep = c.ep;
  r.step_ms.median = 1.0;
  r.phases = phases();
  r.phases.back().bytes_sent = 5e5;
  r.calibration = c;
  r.step_floor_ms = apply_floors(c, 2, r.phases);
  return r;
}

TEST(Roofline, ResultJsonKeys) {
  const nlohmann::json j = result_to_json(run_result(calibration(2)));
  const nlohmann::json& rl = j.at("roofline");
  EXPECT_EQ(rl.at("done"), true);
  EXPECT_EQ(rl.at("gemm_tflops"), 100.0);
  EXPECT_EQ(rl.at("gemm_m"), 8192);
  EXPECT_EQ(rl.at("a2a_applicable"), true);
  EXPECT_EQ(rl.at("a2a_algbw_gbps"), 50.0);
  EXPECT_EQ(rl.at("a2a_busbw_gbps"), 25.0);
  EXPECT_DOUBLE_EQ(rl.at("step_floor_ms").get<double>(), 0.04);
  EXPECT_DOUBLE_EQ(rl.at("step_efficiency").get<double>(), 0.04);  // over a 1 ms step
  const nlohmann::json& ph = j.at("timing").at("phases");
  EXPECT_DOUBLE_EQ(ph.at("experts_fwd").at("floor_ms").get<double>(), 0.02);
  EXPECT_DOUBLE_EQ(ph.at("experts_fwd").at("efficiency").get<double>(), 0.5);
  EXPECT_EQ(ph.at("experts_fwd").at("floor_bound"), "compute");
  EXPECT_EQ(ph.at("a2a_dispatch_fwd").at("floor_bound"), "network");
  EXPECT_TRUE(rl.contains("mem_gbps"));
  EXPECT_DOUBLE_EQ(ph.at("a2a_dispatch_fwd").at("efficiency").get<double>(), 0.25);
  EXPECT_EQ(ph.at("a2a_dispatch_fwd").at("bytes_sent_per_rank"), 5e5);
  EXPECT_FALSE(ph.at("experts_fwd").contains("bytes_sent_per_rank"));
  EXPECT_FALSE(ph.at("layout").contains("floor_ms"));
  EXPECT_FALSE(ph.at("layout").contains("efficiency"));
  // The keys that were there before the roofline are unchanged.
  EXPECT_DOUBLE_EQ(ph.at("a2a_dispatch_fwd").at("bytes_per_rank").get<double>(), 1e6);
  EXPECT_TRUE(ph.at("a2a_dispatch_fwd").contains("algbw_gbps"));
}

TEST(Roofline, ResultJsonWhenOff) {
  const nlohmann::json j = result_to_json(run_result(Calibration{}));
  EXPECT_EQ(j.at("roofline"), nlohmann::json({{"done", false}}));
  for (const auto& item : j.at("timing").at("phases").items()) {
    EXPECT_FALSE(item.value().contains("floor_ms")) << item.key();
    EXPECT_FALSE(item.value().contains("efficiency")) << item.key();
  }
}

}  // namespace
}  // namespace moe
