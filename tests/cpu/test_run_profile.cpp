// `run --profile` over the CPU backend with a device that records what the run asks of it: the
// profiler is started and stopped around the timed steps only (never a warm-up step, never the
// check), the clocks sampled over the same steps, and the result JSON records the option and
// every rank's host; and the result's grouped-tile rows.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/backend.h"
#include "app/run_command.h"
#include "core/device.h"

namespace moe {
namespace {

// "step" per step the layer runs, "start" and "stop" per profiler call, in order.
using Events = std::vector<std::string>;

class RecordingTimer : public PhaseTimer {
 public:
  RecordingTimer(std::unique_ptr<PhaseTimer> inner, std::vector<std::string> names, Events& ev)
      : inner_(std::move(inner)), names_(std::move(names)), ev_(ev) {}
  void begin(int phase) override { inner_->begin(phase); }
  void end(int phase) override {
    inner_->end(phase);
    if (names_[phase] == "step") ev_.push_back("step");
  }
  std::vector<double> read() override { return inner_->read(); }
  const std::vector<PhaseInterval>& intervals() const override { return inner_->intervals(); }

 private:
  std::unique_ptr<PhaseTimer> inner_;
  std::vector<std::string> names_;
  Events& ev_;
};

// A clock sampler that records when it is turned on and off ("on", "off") and, finished, gives
// three readings: 1400, 1500 and 1600 MHz, the first held down for power.
class RecordingClocks : public ClockSampler {
 public:
  explicit RecordingClocks(Events& ev) : ev_(ev) {}
  void set_on(bool on) override {
    if (on != on_) ev_.push_back(on ? "on" : "off");
    on_ = on;
  }
  std::vector<ClockSample> finish() override {
    std::vector<ClockSample> s(3);
    for (int i = 0; i < 3; ++i) s[i].sm_mhz = 1400 + 100 * i, s[i].power_w = 600;
    s[0].power_limited = true;
    return s;
  }
  double power_limit_w() const override { return 700; }
  std::string source() const override { return "recording"; }

 private:
  Events& ev_;
  bool on_ = false;
};

// The CPU backend's device, with the profiler calls and the steps' ends recorded; with
// `clocks`, a RecordingClocks sampler too.
class RecordingDevice : public Device {
 public:
  RecordingDevice(std::unique_ptr<Device> inner, Events& ev, bool clocks = false)
      : inner_(std::move(inner)), ev_(ev), clocks_(clocks) {}
  std::string name() const override { return inner_->name(); }
  void* alloc(size_t bytes) override { return inner_->alloc(bytes); }
  void release(void* p) override { inner_->release(p); }
  size_t bytes_of(DType t) const override { return inner_->bytes_of(t); }
  DType storage_dtype() const override { return inner_->storage_dtype(); }
  void download_floats(float* dst, const void* src, int64_t n, DType t) override {
    inner_->download_floats(dst, src, n, t);
  }
  void fill_seeded(void* dst, const InitRule& rule, int64_t begin, int64_t n) override {
    inner_->fill_seeded(dst, rule, begin, n);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    inner_->copy_to_host(dst, src, bytes);
  }
  uint64_t digest(const void* src, size_t bytes) override { return inner_->digest(src, bytes); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    inner_->copy_to_device(dst, src, bytes);
  }
  void sync() override { inner_->sync(); }
  void fork_side() override { inner_->fork_side(); }
  void to_main() override { inner_->to_main(); }
  void join_side() override { inner_->join_side(); }
  int64_t memory_high_water() const override { return inner_->memory_high_water(); }
  void reset_memory_high_water() override { inner_->reset_memory_high_water(); }
  std::unique_ptr<PhaseTimer> make_timer(std::vector<std::string> names) override {
    return std::make_unique<RecordingTimer>(inner_->make_timer(names), names, ev_);
  }
  double time_memory_copy_ms(int64_t bytes, int iters) override {
    return inner_->time_memory_copy_ms(bytes, iters);
  }
  void profiler_start() override { ev_.push_back("start"); }
  void profiler_stop() override { ev_.push_back("stop"); }
  std::unique_ptr<ClockSampler> make_clock_sampler(std::string& why_none) override {
    if (!clocks_) return inner_->make_clock_sampler(why_none);
    return std::make_unique<RecordingClocks>(ev_);
  }

 private:
  std::unique_ptr<Device> inner_;
  Events& ev_;
  bool clocks_;
};

struct TinyRun {
  int rc = -1;
  std::string events;  // space-separated
  nlohmann::json result;
};

// configs/tiny.json (check on the first timed step) with these options, on the CPU backend;
// with `clocks`, its device has a RecordingClocks sampler.
TinyRun run_tiny(RunOptions opt, bool clocks = false) {
  Events ev;
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("moe_profile_" + std::to_string(getpid()) + ".json"))
                              .string();
  opt.config = std::string(MOE_SOURCE_DIR) + "/configs/tiny.json";
  opt.backend = "cpu";
  opt.out = out;
  opt.quiet = true;
  opt.sets.push_back("roofline=false");
  TinyRun r;
  r.rc = run_command(opt, [&](const std::string& name, MPI_Comm world, const Mesh& mesh,
                              const Workload& w, double timeout_s) {
    Backend b = make_backend(name, world, mesh, w, timeout_s);
    // The ops keep a reference to the CPU device, which the recording one owns and outlives them.
    b.device = std::make_unique<RecordingDevice>(std::move(b.device), ev, clocks);
    return b;
  });
  for (const std::string& e : ev) r.events += (r.events.empty() ? "" : " ") + e;
  std::ifstream in(out);
  if (in) r.result = nlohmann::json::parse(in);
  std::filesystem::remove(out);
  return r;
}

TEST(RunProfile, BracketsTheTimedStepsAndPausesForTheCheck) {
  RunOptions opt;
  opt.profile = true;
  opt.warmup = 2;
  opt.steps = 3;
  const TinyRun r = run_tiny(opt);
  EXPECT_EQ(r.rc, 0);
  // Two warm-up steps outside; the first timed step, then the check with the profiler off, then
  // the other timed steps in one range.
  EXPECT_EQ(r.events, "step step start step stop start step step stop");
  ASSERT_TRUE(r.result.is_object());
  EXPECT_EQ(r.result["provenance"]["profile"], true);
  EXPECT_EQ(r.result["correctness"]["status"], "pass");
}

TEST(RunProfile, OneRangeWithoutTheCheck) {
  RunOptions opt;
  opt.profile = true;
  opt.warmup = 1;
  opt.steps = 3;
  opt.sets = {"check=off"};
  EXPECT_EQ(run_tiny(opt).events, "step start step step step stop");
  opt.sets = {"check=every"};
  EXPECT_EQ(run_tiny(opt).events, "step start step stop start step stop start step stop");
}

TEST(RunProfile, NoProfilerCallsWithoutTheFlag) {
  RunOptions opt;
  opt.warmup = 1;
  opt.steps = 2;
  const TinyRun r = run_tiny(opt);
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.events, "step step step");
  ASSERT_TRUE(r.result.is_object());
  EXPECT_EQ(r.result["provenance"]["profile"], false);
  // The CPU backend records every rank's host, and no GPU.
  const nlohmann::json& ranks = r.result["provenance"]["ranks"];
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0]["rank"], 0);
  EXPECT_FALSE(ranks[0]["host"].get<std::string>().empty());
  EXPECT_FALSE(ranks[0].contains("gpu"));
}

// The clocks are sampled over the stretches the profiler records: the timed steps, not the
// warm-up or the check; their summary is the result's timing.clocks.
TEST(RunProfile, ClocksSampledOverTheTimedSteps) {
  RunOptions opt;
  opt.warmup = 2;
  opt.steps = 3;
  const TinyRun r = run_tiny(opt, true);
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.events, "step step on step off on step step off");
  ASSERT_TRUE(r.result.is_object());
  const nlohmann::json& c = r.result["timing"]["clocks"];
  EXPECT_EQ(c["source"], "recording");
  ASSERT_EQ(c["ranks"].size(), 1u);
  EXPECT_EQ(c["ranks"][0]["samples"], 3);
  EXPECT_DOUBLE_EQ(c["ranks"][0]["sm_mhz"]["median"].get<double>(), 1500);
  EXPECT_DOUBLE_EQ(c["ranks"][0]["power_limit_w"].get<double>(), 700);
  EXPECT_NEAR(c["ranks"][0]["power_limited_share"].get<double>(), 1.0 / 3, 1e-12);
  // Without a sampler (the CPU backend's own device): none, and why.
  const TinyRun plain = run_tiny(opt);
  EXPECT_TRUE(plain.result["timing"]["clocks"]["ranks"].empty());
  EXPECT_NE(plain.result["timing"]["clocks"]["why_none"].get<std::string>().find("cpu"),
            std::string::npos);
}

// The grouped kernel's tiles over balanced routing: 640 tokens x 2 over 8 experts is 160 rows
// each, two 128-row tiles each: 256 / 160 = 1.6 the rows.
TEST(RunResult, GroupedTileRowsOfBalancedRouting) {
  RunOptions opt;
  opt.warmup = 1;
  opt.steps = 2;
  opt.sets = {"check=off", "tokens_per_rank=640", "routing.mode=balanced"};
  const TinyRun r = run_tiny(opt);
  EXPECT_EQ(r.rc, 0);
  ASSERT_TRUE(r.result.is_object());
  const nlohmann::json& t = r.result["routing"]["tile_rows"];
  EXPECT_EQ(t["tile"], 128);
  EXPECT_DOUBLE_EQ(t["over_rows"].get<double>(), 1.6);
  // With a capacity the counts hold rows it drops: not computed.
  opt.sets = {"check=off", "capacity_factor=1.0"};
  const TinyRun capped = run_tiny(opt);
  EXPECT_EQ(capped.rc, 0);
  ASSERT_TRUE(capped.result.is_object());
  ASSERT_TRUE(capped.result["routing"].contains("tile_rows"));
  EXPECT_TRUE(capped.result["routing"]["tile_rows"].is_null());
}

}  // namespace
}  // namespace moe
