#pragma once
// Which method runs each expert GEMM, where the backend has several (the CUDA backend's
// per-expert cuBLASLt loop, its one grouped cuBLAS call and our grouped sm90 kernel): none wins
// on every shape, nor on every GEMM of one workload (DeepSeek-V3's FP8 forward is faster on our
// kernel, its weight gradients on cuBLASLt). The last steps of the warm-up try each method on all
// six GEMMs twice in turn, timing each GEMM. The method whose experts phases were fastest is the
// base; the mix ("per_gemm") runs a GEMM on another method where that one was at least
// kSwitchMargin faster on it. Where the mix differs from the base, four more steps run the mix and
// the base in turn, and the mix is kept only where its better try beat the base's: side by side,
// because a GPU's clock drifts over a run's first steps (on an H200, Mixtral-8x7B's experts
// phases 19.6 ms in steps 2-4 and 21-22 ms from step 5, one method throughout), which would
// favour whichever ran earlier. Times are the steps' max over ranks, so every rank chooses the
// same. Then the choice runs the workload's warm-up again, on the inputs a fixed method's
// warm-up draws, so that the timed steps meet it as planned as a run that fixed it: the tries
// all run on one step's inputs, and the per-expert cuBLASLt loop plans each new row count (a
// heuristic query, up to milliseconds of host time inside a step). Mixtral-8x7B at EP 2, auto
// choosing lt_multistream: 90 heuristic queries in 20 timed steps, the first steps 32-75 ms,
// before; 36, as with lt_multistream fixed, after. Its median stayed 1.3-1.7 ms above the fixed
// run's all the same, not by the choice: its 10 more untimed steps put the middle of its timed
// steps where the GPUs had reached their power cap and lowered their clocks, and lt_multistream
// fixed with as many untimed steps was as slow (results/2026-11-27-session26).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "app/run_result.h"
#include "core/ops.h"

namespace moe {

class GemmMethodChoice {
 public:
  // A GEMM leaves the base method only for one at least this much faster on it (its better try):
  // per-GEMM times of two tries differ by a few percent from step to step.
  static constexpr double kSwitchMargin = 0.05;

  // methods: the backend's (empty or one: nothing to choose). The last 2 * n + 4 steps of the
  // warm-up try the n methods twice in turn, then the mix and the base twice in turn; the choice
  // then runs `warmup` steps of its own. With fewer warm-up steps than the tries need, steps are
  // added for them (the default warm-up, 3, is shorter than the 8 or 10 steps two or three
  // methods need, and a choice never made leaves the slowest method on some shapes:
  // Qwen3-30B-A3B's step 8.8 ms on the loop against 4.7 on the grouped sm90 kernel).
  GemmMethodChoice(std::vector<std::string> methods, int64_t warmup);

  bool active() const { return first_try_ >= 0; }
  // The steps run before the timed ones: the warm-up (with any steps added for the tries), then
  // the choice's own warm-up.
  int64_t untimed_steps() const { return tries_end() + own_warmup(); }
  // Steps added to the warm-up for the tries and the choice's own warm-up (0 with nothing to
  // choose).
  int64_t added_steps() const { return added_ + own_warmup(); }
  // The step whose inputs step s runs on, numbered as without added steps (so that a run's
  // timed steps draw the same inputs as a run of the same workload that chose nothing, on the
  // CPU backend, say; the choice's own warm-up draws those of warm-up steps 0, 1, ...). Every
  // try runs on the first try's inputs: the same
  // routing, so the same rows per expert. The per-expert loop plans each GEMM shape once (a
  // cuBLASLt heuristic query per new row count), so on fresh routing its first steps pay for
  // planning that steady steps mostly do not; on repeated inputs its second try is planned, as a
  // grouped call always is. On H200, DeepSeek-V3 at EP 1: the loop's tries on fresh inputs took
  // 57 ms (its timed steps in an earlier run: 30 ms), so the grouped call (41 ms) was chosen.
  int64_t input_step(int64_t s) const;
  // The methods to set before step s (a try, or the choice before its own warm-up), or
  // nothing to leave them.
  std::optional<ExpertGemmMethods> methods_for_step(int64_t s) const;
  // Whether step s tries one method on every GEMM, so that record() needs its GEMMs' times.
  bool times_gemms(int64_t s) const;
  // Step s's experts phases (ms, max over ranks) and, on a step that times_gemms(), its GEMMs'
  // (the same; NaN where the backend has none). Steps that are not tries are ignored.
  void record(int64_t s, double experts_ms, const ExpertGemmMs& gemm_ms);
  // Once the tries are done: each GEMM's method for the timed steps ("" when not active), and
  // its name: the method's where all six have one, else per_gemm.
  ExpertGemmMethods choice() const;
  std::string choice_name() const;
  // Each method's better try (experts fwd+bwd ms); empty when not active.
  std::map<std::string, double> tries_ms() const;
  // Per method, each GEMM's better time in its tries (ms); empty when not active.
  std::map<std::string, std::map<std::string, double>> gemm_tries_ms() const;
  // The mix and its tries against the base.
  PerGemmTry per_gemm_try() const;
  // For the log: "per_gemm (chosen in warm-up: lt_multistream 12.31 ms, grouped_sm90 8.10 ms
  // experts fwd+bwd; per_gemm (up grouped_sm90, ...) 7.95 ms against grouped_sm90 8.05 ms in
  // alternate steps)".
  std::string summary() const;

 private:
  int64_t tries_end() const { return warmup_ + added_; }         // the step that starts the choice
  int64_t own_warmup() const { return active() ? warmup_ : 0; }  // the choice's, after it
  size_t base() const;            // the method whose own tries were fastest
  ExpertGemmMethods mix() const;  // the base, with GEMMs switched where another is faster
  bool mixed() const;             // whether the mix differs from the base

  std::vector<std::string> methods_;
  std::vector<double> best_ms_;                      // per method, its own tries
  std::vector<ExpertGemmMs> best_gemm_ms_;           // per method
  double mix_ms_, base_ms_;                          // the alternate steps' better tries
  int64_t first_try_ = -1, warmup_ = 0, added_ = 0;  // added_: steps added for the tries
};

}  // namespace moe
