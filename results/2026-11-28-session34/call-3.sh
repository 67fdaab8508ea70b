#!/usr/bin/env bash
# Session 34, call 3 (one H200): where Mixtral-8x7B's fp8_tensor check loses dx: each expert's
# per-tensor amax of a, dy and dh, backend against reference (the throwaway MOE_DEBUG_AMAX print,
# results/2026-11-28-session34/fp8-tensor-amax-print.diff), at the step `check: first` checks and
# on every step of a short run with `check: every`.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j16 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
run() {  # name lim [more]
  local n=$1 lim=$2; shift 2
  [ $(el) -gt $lim ] && { echo "skip $n" >> $S; return; }
  MOE_DEBUG_AMAX=1 timeout 150 $B run --backend cuda --set align=16 --set roofline=false --set precision=fp8_tensor --set warmup_s=0 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# check' $L/$n.log | tr '\n' ' ')" >> $S
  grep -E '^# amax reference' $L/$n.log >> $S
  grep -E 'amax backend' $L/$n.log | tail -6 >> $S
  grep -E '^  (dx|out|dw_gate|dw_in|dw_out) ' $L/$n.log >> $S
}
run mx-first 200 --config bench/mixtral_8x7b --set check=first --set fp8_weights=cached --steps 3 --warmup 2
run mx-every-grouped 330 --config bench/mixtral_8x7b --set check=every --set fp8_weights=cached --set gemm.method=grouped_sm90 --steps 4 --warmup 0
run qw-every 420 --config bench/qwen3_30b_a3b --set check=every --steps 6 --warmup 0 --set gemm.method=grouped_sm90
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
