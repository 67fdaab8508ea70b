#!/usr/bin/env bash
# Session 33, call 4 (one H200): BufferPlanCuda (the memory estimate against the CUDA device's
# high-water) on the tree; Mixtral-8x7B fp8_tensor's check (call 3: dx 1.055e-2 against 1e-2) on
# main 1dad99b (ab_trees/base) and on the tree, same command, and with the check matrix's flags.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
( cmake -S ab_trees/base -B ab_trees/base/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > $L/cmake-base.log 2>&1 &&
  cmake --build ab_trees/base/build -j8 --target moebench > $L/build-base.log 2>&1; echo "base build rc=$? at $(el) s" >> $S ) &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j10 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 60 build-gpu/tests/moe_cuda_tests --gtest_filter='BufferPlanCuda*' > $L/tests-plan.log 2>&1
echo "BufferPlanCuda rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests-plan.log | tr '\n' ' ')" >> $S
grep -E "^# |Which is|Failure" $L/tests-plan.log | head -40 >> $S
wait
chk() {  # bin name [args]
  local b=$1 n=$2; shift 2
  [ $(el) -gt 520 ] && { echo "skip $n" >> $S; return; }
  timeout 75 $b run --backend cuda --set align=16 --set roofline=false --set check=first "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# check:' $L/$n.log) | $(grep -E '^  (out|dx|dw_in) ' $L/$n.log | awk '{printf "%s %s  ", $1, $2}')" >> $S
}
MX="--config bench/mixtral_8x7b --set precision=fp8_tensor --set fp8_weights=cached"
chk ab_trees/base/build/moebench mx-fp8t-base $MX --steps 3 --warmup 2 --set warmup_s=0
chk build-gpu/moebench mx-fp8t-tree $MX --steps 3 --warmup 2 --set warmup_s=0
chk build-gpu/moebench mx-fp8t-matrix $MX --steps 1 --warmup 1 --set expert_grad_dtype=bf16 --set gemm.method=lt_multistream
chk build-gpu/moebench mx-fp8t-sm90 $MX --steps 3 --warmup 2 --set warmup_s=0 --set gemm.method=grouped_sm90
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
