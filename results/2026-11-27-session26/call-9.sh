#!/usr/bin/env bash
# Session 26, call 9 (one H100): main as it stands at the stop, once on the GPU: all GPU tests; the
# Qwen3-30B-A3B bench workload (its warmup_s 5, graph true) checked, with the warm-up's progress
# lines.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j16 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests_all.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_all.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests_all.log | head >> $S
n=qwen3-graph-check
timeout 150 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --backend cuda --set check=first --steps 20 --warmup 3 --set graph=true --set align=16 --set expert_grad_dtype=bf16 --set gemm.method=grouped_sm90 --set roofline=false --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s" >> $S
grep -E 'warm-up|^# (mesh|check|warning|host)|^  step ' $L/$n.log >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
