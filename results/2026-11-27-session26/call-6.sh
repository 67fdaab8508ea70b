#!/usr/bin/env bash
# Session 26, call 6 (one H100): FP8 on 256 columns by quarters: each stage's four 64-column
# quarters in turn through two 32-register partial sums, one quarter's MMAs in flight while the
# one before is added (one drain a stage, not two). An experiment switch (MOE_EXP_FP8_QUARTERS=3:
# row GEMMs and weight gradients), not landed as one: GPU tests of the grouped GEMMs on it;
# moebench gemm in FP8 against the tree without it, two rounds.
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
    cmake --build $1 -j8 --target $3 > $L/build-$(basename $1).log 2>&1
  echo "build $1 rc=$? at $(el) s" >> $S
}
bld /tmp/bbase "" "moebench" &
bld /tmp/bq "-DMOE_EXP_FP8_QUARTERS=3" "moebench moe_cuda_tests" &
wait
timeout 150 /tmp/bq/tests/moe_cuda_tests --gtest_filter='*Grouped*:*Fp8*:*FP8*' > $L/tests-q.log 2>&1
echo "tests q rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests-q.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests-q.log | head >> $S
run() {  # build config ep precision round
  local n=$1-$(basename $2 .json)-ep$3-$4-r$5
  [ $(el) -gt 500 ] && { echo "skip $n" >> $S; return; }
  timeout 60 /tmp/$1/moebench gemm --config $2 --ep $3 --methods grouped_sm90 --iters 10 --set align=16 --set expert_grad_dtype=bf16 --set precision=$4 > $L/$n.log 2>&1
  echo "$n rc=$? $(grep -E '^  (up|down|dgrad|wgrad).*fp8' $L/$n.log | awk '{printf "%s %s | ", $1, $6}')" >> $S
}
for r in 1 2; do
  for cfg in "configs/bench/deepseek_v3.json 2 fp8_block" "configs/bench/deepseek_v3.json 2 fp8_tensor" "configs/bench/qwen3_30b_a3b.json 1 fp8_block" "configs/bench/mixtral_8x7b.json 1 fp8_tensor"; do
    set -- $cfg
    for b in bbase bq; do run $b $1 $2 $3 $r; done
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
