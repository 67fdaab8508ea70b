#!/usr/bin/env bash
# Session 34, call 4 (one H200): how often Mixtral-8x7B's fp8_tensor check fails over steps, and
# where (the throwaway MOE_DEBUG_AMAX print, fp8-tensor-amax-print.diff): `check: every` over 6
# steps on each GEMM method (cuBLASLt, the grouped kernel).
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
  MOE_DEBUG_AMAX=1 timeout 200 $B run --backend cuda --set align=16 --set roofline=false --set precision=fp8_tensor --set warmup_s=0 --set fp8_weights=cached "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# check' $L/$n.log | tr '\n' ' ')" >> $S
  grep -E 'checking step|failed|FAIL' $L/$n.log | head -20 >> $S
}
run mx-every-lt 150 --config bench/mixtral_8x7b --set check=every --set gemm.method=lt_multistream --steps 6 --warmup 1
run mx-every-grouped 300 --config bench/mixtral_8x7b --set check=every --set gemm.method=grouped_sm90 --steps 6 --warmup 1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
