#!/usr/bin/env bash
# Session 16, call 5 (one H200): fp8_block's weight gradients draining their MMAs every stage (one partial
# sum live: no spills, the column scales loaded at once) in the tree, against chunks of 4 (f8042e4, old/).
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs old
S="$OUT/summary.txt"
tar xzf devrun/old.tgz -C old
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j8 > /tmp/build.log 2>&1; echo "new rc=$?" >> $S) &
(cd old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake_old.log 2>&1 && cmake --build build-gpu -j8 --target moebench > /tmp/build_old.log 2>&1; echo "old rc=$?" >> $S) &
wait
grep -B2 -A10 " error" /tmp/build.log /tmp/build_old.log | head -30 >> $S
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception" $OUT/logs/gpu_tests.txt | head -20 >> $S
grep -E "largest error" $OUT/logs/gpu_tests.txt | grep -E "^  block" | sort -k7 -g | tail -2 >> $S
for c in "mixtral_8x7b 1 8192" "deepseek_v3 2 4096" "qwen3_30b_a3b 1 8192"; do
  set -- $c
  for b in old new new old; do
    bin=build-gpu/moebench; [ $b = old ] && bin=old/build-gpu/moebench
    timeout 90 $bin gemm --config configs/bench/$1.json --ep $2 --set tokens_per_rank=$3 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_block --methods grouped_sm90 --iters 10 > $OUT/logs/gemm_$1_$b.log 2>&1; echo "== $b gemm $1 fp8_block rc=$?" >> $S
    grep -E "fp8_block:" $OUT/logs/gemm_$1_$b.log | awk '{print $1, $6, $10}' | tr '\n' ' ' >> $S; echo >> $S
  done
done
for v in "expert_grad_dtype=fp32" "expert_grad_dtype=fp32 --set overlap=pipeline"; do
  timeout 60 build-gpu/moebench run --config configs/tiny.json --backend cuda --set precision=fp8_block --set align=16 --steps 4 --warmup 2 --set check=every --set gemm.method=grouped_sm90 --set $v > $OUT/logs/tiny.log 2>&1; echo "== tiny $v rc=$? $(grep -E '^# check' $OUT/logs/tiny.log)" >> $S
  grep -E "^  (dw_in|dw_out) " $OUT/logs/tiny.log | tr -s ' ' | tr '\n' ';' >> $S; echo >> $S
done
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
