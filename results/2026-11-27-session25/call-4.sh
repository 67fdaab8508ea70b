#!/usr/bin/env bash
# Session 25, call 4 (one H100): the weight gradients' staging boxes against their stages. Today 4
# boxes per MMA warpgroup (a whole bf16 tile) leave 6 bf16 stages (3 FP8); 2 boxes give 7 (3), 1
# box 8 (4), the tile stored in 2 or 4 rounds. Three builds of this tree (MOE_EXP_WGRAD_BOXES, an
# experiment switch not landed); GPU tests of the grouped GEMMs on the variants; moebench gemm on
# DeepSeek-V3's EP 1 and EP 2 shapes and Qwen3-30B-A3B's, bf16 and fp8_block, two rounds.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
bld() {  # dir flags targets
  cmake -S . -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_FLAGS=$2" > $L/cmake-$(basename $1).log 2>&1 &&
    cmake --build $1 -j5 --target $3 > $L/build-$(basename $1).log 2>&1
  echo "build $1 rc=$? at $(el) s" >> $S
}
bld /tmp/b4 "" "moebench" &
bld /tmp/b2 "-DMOE_EXP_WGRAD_BOXES=2" "moebench moe_cuda_tests" &
bld /tmp/b1 "-DMOE_EXP_WGRAD_BOXES=1" "moebench moe_cuda_tests" &
wait
for v in b2 b1; do
  timeout 100 /tmp/$v/tests/moe_cuda_tests --gtest_filter='*Grouped*:*Fp8*' > $L/tests-$v.log 2>&1
  echo "tests $v rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests-$v.log | tr '\n' ' ')" >> $S
done
G="--methods grouped_sm90 --iters 10 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_block"
run() {  # variant config ep
  local n=$1-$(basename $2 .json)-ep$3-r$r
  [ $(el) -gt 570 ] && { echo "skip $n" >> $S; return; }
  timeout 60 /tmp/$1/moebench gemm --config $2 --ep $3 $G > $L/$n.log 2>&1
  echo "$n rc=$? $(grep -E '^  wgrad' $L/$n.log | awk '{printf "%s %s | ", $1, $6}')" >> $S
}
for r in 1 2; do
  for cfg in "configs/bench/deepseek_v3.json 2" "configs/bench/deepseek_v3.json 1" "configs/bench/qwen3_30b_a3b.json 1"; do
    set -- $cfg
    for v in b4 b2 b1; do run $v $1 $2; done
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
