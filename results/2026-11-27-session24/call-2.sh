#!/usr/bin/env bash
# Session 24, call 2 (1 GPU): the weight gradients' staging boxes as a ring (one bulk group per
# box; FP8's two-box tiles keep a second tile's stores in flight). Base (947bc08) against the new
# tree, and the new tree built with a ring of 6 boxes for bf16 (MOE_EXP_RING=6, an experiment,
# fewer stages). All GPU tests on the new tree; moebench gemm (grouped_sm90), alternating.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
mkdir -p /tmp/base && tar xf devrun/base.tar -C /tmp/base
( cmake -S /tmp/base -B /tmp/base/build -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-base.log 2>&1 &&
  cmake --build /tmp/base/build -j5 --target moebench > $L/build-base.log 2>&1; echo "base build rc=$? at $(el) s" >> $S ) &
( cmake -S . -B build-ring6 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DMOE_EXP_RING=6 > $L/cmake-ring6.log 2>&1 &&
  cmake --build build-ring6 -j5 --target moebench > $L/build-ring6.log 2>&1; echo "ring6 build rc=$? at $(el) s" >> $S ) &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j8 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 150 build-gpu/tests/moe_cuda_tests > $L/tests_all.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_all.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests_all.log | head >> $S
wait
echo "all built at $(el) s" >> $S
G="--methods grouped_sm90 --iters 10 --set align=16 --set expert_grad_dtype=bf16"
run() {  # bin tag config ep precision
  local n=$2-$(basename $3 .json)-ep$4-$5
  [ $(el) -gt 560 ] && { echo "skip $n" >> $S; return; }
  timeout 60 $1 gemm --config $3 --ep $4 $G --set precision=$5 > $L/$n.log 2>&1
  echo "$n rc=$? $(grep -E '^  (wgrad|up|down|dgrad)' $L/$n.log | awk '{printf "%s %s | ", $1, $6}')" >> $S
}
for r in 1 2; do
  for cfg in "configs/bench/deepseek_v3.json 1" "configs/bench/deepseek_v3.json 2" "configs/bench/qwen3_30b_a3b.json 1"; do
    set -- $cfg
    run /tmp/base/build/moebench base $1 $2 fp8_block
    run build-gpu/moebench new $1 $2 fp8_block
    run /tmp/base/build/moebench base $1 $2 bf16
    run build-gpu/moebench new $1 $2 bf16
    run build-ring6/moebench ring6 $1 $2 bf16
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
