#!/usr/bin/env bash
# Session 43, call 6 (one H200, the last ~250 s of the budget): main a3805eb + stmatrix-epilogue.diff
# built alone; the grouped GEMM GPU tests; digests to compare here with call 1's main-kernel
# digests (same commands); two `moebench gemm` runs on Qwen3-30B-A3B's routed rows.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
git apply results/2026-11-29-session43/stmatrix-epilogue.diff; echo "apply rc=$?" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 25 build-gpu/tests/moe_cuda_tests --gtest_filter='*Grouped*:*ExpertFfn*' > $L/tests.log 2>&1
echo "grouped GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests.log | head -5 >> $S
for c in qw ds; do
  [ $(el) -gt 160 ] && break
  case $c in qw) args="--config bench/qwen3_30b_a3b";; ds) args="--config bench/deepseek_v3 --set tokens_per_rank=1024";; esac
  timeout 20 build-gpu/moebench run --backend cuda $args --set gemm.method=grouped_sm90 --set align=16 --set check=off --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 --out $OUT/dig-$c-B.json > $L/dig-$c-B.log 2>&1
  echo "digests $c rc=$? at $(el) s" >> $S
done
for r in 1 2; do
  [ $(el) -gt 168 ] && break
  timeout 8 build-gpu/moebench gemm --config bench/qwen3_30b_a3b --rows routed --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 50 > $L/gemm-qw-$r.log 2>&1
  echo "== gemm qw B round $r rc=$? at $(el) s: $(grep -E '^  (up|down|dgrad_a|dgrad_x|wgrad_out|wgrad_in) ' $L/gemm-qw-$r.log | awk '{print $1, $6}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/gemm-qw-$r.log)" >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
