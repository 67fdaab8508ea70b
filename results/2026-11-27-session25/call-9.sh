#!/usr/bin/env bash
# Session 25, call 9 (one H100): main as landed (6548a2d: fp32 gradients back on four boxes). All
# GPU tests; Qwen3-30B-A3B's check; moebench gemm's weight gradients (bf16 and fp32 gradients).
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
n=check-qwen3-bf16
timeout 100 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --backend cuda --set check=first --steps 1 --warmup 1 --set roofline=false --set align=16 --set expert_grad_dtype=bf16 --set gemm.method=grouped_sm90 --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s: $(grep -E '^# check:' $L/$n.log)" >> $S
for g in bf16 fp32; do
  n=gemm-deepseek-ep2-$g
  timeout 60 build-gpu/moebench gemm --config configs/bench/deepseek_v3.json --ep 2 --methods grouped_sm90 --iters 10 --set align=16 --set precision=bf16 --set expert_grad_dtype=$g > $L/$n.log 2>&1
  echo "$n rc=$? $(grep -E '^  wgrad' $L/$n.log | awk '{printf "%s %s | ", $1, $6}')" >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
