#!/usr/bin/env bash
# Session 24, call 3 (1 GPU): FP8 on 256-column tiles (each stage's two 128-column halves in
# turn into one 64-register partial sum). The tree built twice: FP8 tiles 128 wide by default,
# and 256 wide for N > 128 (MOE_EXP_FP8_BN=256, the experiment's switch). All GPU tests (the FP8
# tests force both widths); moebench gemm in FP8 on the bench shapes, 128 against 256, alternating.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
( cmake -S . -B build-w256 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DMOE_EXP_FP8_BN=256 > $L/cmake-w256.log 2>&1 &&
  cmake --build build-w256 -j6 --target moebench > $L/build-w256.log 2>&1; echo "w256 build rc=$? at $(el) s" >> $S ) &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j10 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests_all.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_all.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|largest error' $L/tests_all.log | sort | uniq -c | sort -rn | head -12 >> $S
wait
echo "all built at $(el) s" >> $S
G="--methods grouped_sm90 --iters 10 --set align=16 --set expert_grad_dtype=bf16"
run() {  # bin tag config ep precision
  local n=$2-$(basename $3 .json)-ep$4-$5
  [ $(el) -gt 540 ] && { echo "skip $n" >> $S; return; }
  timeout 60 $1 gemm --config $3 --ep $4 $G --set precision=$5 > $L/$n.log 2>&1
  echo "$n rc=$? $(grep -E '^  (wgrad|up|down|dgrad)' $L/$n.log | awk '{printf "%s %s | ", $1, $6}')" >> $S
}
for r in 1 2; do
  for cfg in "configs/bench/deepseek_v3.json 1" "configs/bench/deepseek_v3.json 2" "configs/bench/qwen3_30b_a3b.json 1" "configs/bench/mixtral_8x7b.json 1"; do
    set -- $cfg
    run build-gpu/moebench w128 $1 $2 fp8_block
    run build-w256/moebench w256 $1 $2 fp8_block
  done
done
for cfg in "configs/bench/deepseek_v3.json 2" "configs/bench/mixtral_8x7b.json 1"; do
  set -- $cfg
  run build-gpu/moebench w128 $1 $2 fp8_tensor
  run build-w256/moebench w256 $1 $2 fp8_tensor
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
