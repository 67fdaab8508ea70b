#!/usr/bin/env bash
# Session 35, call 4 (one H200): check_unquantized on the CUDA backend -- Qwen3-30B-A3B's
# fp8_tensor check with and without the unquantized reference: both pass with the same figures,
# the one without says so and takes about half the time.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
for u in true false; do
  /usr/bin/time -f "%e s" -o $L/time-$u.txt timeout 80 $B run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set roofline=false --set precision=fp8_tensor --set warmup_s=0 --set fp8_weights=cached --set gemm.method=grouped_sm90 --set check=first --set check_unquantized=$u --steps 3 --warmup 2 --out $L/qw-$u.json > $L/qw-$u.log 2>&1
  echo "== qw check_unquantized=$u rc=$? at $(el) s, run $(cat $L/time-$u.txt): $(grep -E '^# (check|fp8 scales|\(fp8)' $L/qw-$u.log | tr '\n' ' ')" >> $S
  grep -E '^  (out|dx|dw_in) ' $L/qw-$u.log >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
