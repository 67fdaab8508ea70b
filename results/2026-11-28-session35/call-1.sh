#!/usr/bin/env bash
# Prepared in session 34 for the next device call (one H200, or 2 H200s for the EP 2 check), not
# yet run: fp8-scale-ties.diff (the check takes a backend's fp8_tensor scale at a near tie; both
# backends report) applied from the repository root first
# (`git apply results/2026-11-28-session34/fp8-scale-ties.diff`). Then: the GPU tests it
# touches, and Mixtral-8x7B's fp8_tensor check on every one of 6 steps with each GEMM method,
# which failed 2 of 6 before (call 4): they should pass, with the scales taken counted on the
# '# fp8 scales:' line.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 150 build-gpu/tests/moe_cuda_tests --gtest_filter='*Fp8*:BufferPlanCuda*:Router*' > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Which is|reported scale' $L/tests.log | head -20 >> $S
B=build-gpu/moebench
run() {  # name lim [more]
  local n=$1 lim=$2; shift 2
  [ $(el) -gt $lim ] && { echo "skip $n" >> $S; return; }
  timeout 200 $B run --backend cuda --set align=16 --set roofline=false --set precision=fp8_tensor --set warmup_s=0 --set fp8_weights=cached "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# (check|checked|fp8 scales)' $L/$n.log | tr '\n' ' ')" >> $S
  grep -E 'FAILED at step' $L/$n.log | head >> $S
}
run mx-every-lt 200 --config bench/mixtral_8x7b --set check=every --set gemm.method=lt_multistream --steps 5 --warmup 1
run mx-every-grouped 330 --config bench/mixtral_8x7b --set check=every --set gemm.method=grouped_sm90 --steps 5 --warmup 1
run qw-first 530 --config bench/qwen3_30b_a3b --set check=first --steps 3 --warmup 2
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
