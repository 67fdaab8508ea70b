#!/usr/bin/env bash
# Session 17, call 3 (one H200): per-GEMM choice with a 5% switch margin and the mix tried against
# the fastest method in alternate steps (tree) against one method for all six (HEAD, old/).
# GPU tests; steps with gemm.method auto, both binaries, bf16 / fp8_tensor / fp8_block on three
# workloads; DeepSeek-V3 bf16 checked against the GPU reference with its choice.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs old
S="$OUT/summary.txt"
tar xzf devrun/old.tgz -C old
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j10 > /tmp/build.log 2>&1; echo "new rc=$?" >> $S) &
(cd old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake_old.log 2>&1 && cmake --build build-gpu -j6 --target moebench > /tmp/build_old.log 2>&1; echo "old rc=$?" >> $S) &
wait
grep -B2 -A10 " error" /tmp/build.log /tmp/build_old.log | head -30 >> $S
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception" $OUT/logs/gpu_tests.txt | head -20 >> $S
echo "tests at $(( $(date +%s) - START )) s" >> $S
n=check_deepseek_v3_bf16
timeout 150 build-gpu/moebench run --config configs/bench/deepseek_v3.json --set tokens_per_rank=4096 --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=first --set reference=gpu --steps 3 --warmup 8 --out $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S
grep -E '^# expert GEMMs|^# check|PASS|FAIL' $OUT/logs/$n.log | cut -c1-400 | head -20 >> $S
for c in "qwen3_30b_a3b 8192" "mixtral_8x7b 8192" "deepseek_v3 4096"; do
  set -- $c
  for v in bf16 fp8_tensor fp8_block; do
    for b in new old; do
      bin=build-gpu/moebench; [ $b = old ] && bin=old/build-gpu/moebench
      n=step_$1_${v}_$b
      timeout 110 $bin run --config configs/bench/$1.json --set tokens_per_rank=$2 --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 10 --set precision=$v --out $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $b $1 $v rc=$?" >> $S; grep -E '^# expert GEMMs' $OUT/logs/$n.log | cut -c1-500 >> $S
      grep -E "^  step |^  experts_fwd|^  experts_bwd" $OUT/logs/$n.log >> $S
    done
  done
  echo "at $(( $(date +%s) - START )) s" >> $S
done
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
