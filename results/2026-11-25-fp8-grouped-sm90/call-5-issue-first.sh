#!/usr/bin/env bash
# Session 13, call 5 (one H200): FP8 promotion after issuing the next stage (wait for all, issue,
# add the done partial sum). GPU tests (FP8 + grouped); `moebench gemm` fp8_tensor.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 150 build-gpu/tests/moe_cuda_tests --gtest_filter='*Fp8*:*GroupedGemm*' > $OUT/logs/fp8_tests.txt 2>&1; echo "fp8+grouped gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/fp8_tests.txt | tr '\n' ' ')" >> $S
grep -E "FAILED|Failure|largest error|got .* want" $OUT/logs/fp8_tests.txt | head -30 >> $S
for w in mixtral_8x7b:8192:1 qwen3_30b_a3b:8192:1 deepseek_v3:4096:2; do
  IFS=: read c t ep <<< "$w"
  n=gemm_${c}_fp8_tensor
  timeout 80 build-gpu/moebench gemm --config configs/bench/$c.json --ep $ep --set tokens_per_rank=$t --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods lt_multistream,grouped_sm90 --iters 10 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1
  echo "== $n rc=$?" >> $S; grep -E "fp8_tensor:|dense" $OUT/logs/$n.log | cut -c1-110 >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
