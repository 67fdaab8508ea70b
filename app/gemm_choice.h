#pragma once
// Which expert GEMM method a workload runs with, where the backend has several (the CUDA
// backend's per-expert cuBLASLt loop and its one grouped call: neither wins on every shape).
// The last untimed steps try each in turn; the timed steps use the one whose experts phases were
// fastest. Times are the steps' max over ranks, so every rank picks the same method.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moe {

class GemmMethodChoice {
 public:
  // methods: the backend's (empty or one: nothing to choose). The last 2 * n untimed steps try
  // the n methods twice in turn, keeping each one's better try. With fewer than 2 * n warm-up
  // steps, steps are added before the timed ones to make 2 * n (the default warm-up, 3, is
  // shorter than the 4 or 6 steps two or three methods need, and a choice never made leaves
  // the slowest method on some shapes: Qwen3-30B-A3B's step 8.8 ms on the loop against 4.7 on
  // the grouped sm90 kernel).
  GemmMethodChoice(std::vector<std::string> methods, int64_t warmup);

  bool active() const { return first_try_ >= 0; }
  // The steps run before the timed ones: the warm-up and any added for the tries.
  int64_t untimed_steps() const { return warmup_ + added_; }
  // Steps added to the warm-up for the tries (0 when it is long enough, or nothing to choose).
  int64_t added_steps() const { return added_; }
  // The step whose inputs step s runs on, numbered as without added steps (so that a run's
  // timed steps draw the same inputs as a run of the same workload that chose nothing, on the
  // CPU backend, say). Every try runs on the first try's inputs: the same
  // routing, so the same rows per expert. The per-expert loop plans each GEMM shape once (a
  // cuBLASLt heuristic query per new row count), so on fresh routing its first steps pay for
  // planning that steady steps mostly do not; on repeated inputs its second try is planned, as a
  // grouped call always is. On H200, DeepSeek-V3 at EP 1: the loop's tries on fresh inputs took
  // 57 ms (its timed steps in an earlier run: 30 ms), so the grouped call (41 ms) was chosen.
  int64_t input_step(int64_t s) const;
  // The method to set before step s (a try, or the winner before the first timed step), or ""
  // to leave the current one.
  std::string method_for_step(int64_t s) const;
  // experts_ms: step s's experts_fwd + experts_bwd (ms, max over ranks).
  void record(int64_t s, double experts_ms);
  // The fastest method once the tries are done ("" when not active).
  std::string winner() const;
  // Each method's better try (experts fwd+bwd ms, max over ranks); empty when not active.
  std::map<std::string, double> tries_ms() const;
  // For the log: "grouped_batched (chosen in warm-up: lt_multistream 12.31 ms,
  // grouped_batched 8.10 ms experts fwd+bwd)".
  std::string summary() const;

 private:
  std::vector<std::string> methods_;
  std::vector<double> best_ms_;
  int64_t first_try_ = -1, warmup_ = 0, added_ = 0;
};

}  // namespace moe
