#!/usr/bin/env bash
# Session 13, call 8 (one H200): FP8 weight gradients in the grouped kernel too. GPU tests;
# `moebench gemm` fp8_tensor per method; steps (EP 1, bf16 expert gradients, median of 20).
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|largest error|got .* want" $OUT/logs/gpu_tests.txt | head -40 >> $S
grep -E "grouped_sm90 (dw|dxe|h )" $OUT/logs/gpu_tests.txt | head -20 >> $S
for p in fp8_tensor:grouped_sm90 fp8_tensor:auto; do
  IFS=: read pr m <<< "$p"
  timeout 60 build-gpu/moebench run --config configs/tiny.json --backend cuda --set precision=$pr --set align=16 --set gemm.method=$m --steps 3 > $OUT/logs/tiny_${pr}_$m.log 2>&1; echo "== tiny $pr $m rc=$?" >> $S
  grep -E "^  (out|dx|dw_in|dw_out|dw_gate) |^# check|runs .* instead|expert GEMMs:" $OUT/logs/tiny_${pr}_$m.log | head -10 >> $S
done
for w in mixtral_8x7b:8192:1 qwen3_30b_a3b:8192:1 deepseek_v3:4096:2; do
  IFS=: read c t ep <<< "$w"
  n=gemm_${c}_fp8_tensor
  timeout 80 build-gpu/moebench gemm --config configs/bench/$c.json --ep $ep --set tokens_per_rank=$t --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods lt_multistream,grouped_sm90 --iters 10 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1
  echo "== $n rc=$?" >> $S; grep -E "fp8_tensor:|dense" $OUT/logs/$n.log | cut -c1-110 >> $S
done
echo "at $(( $(date +%s) - START )) s" >> $S
tim() { n=$1; shift 1; [ $(( $(date +%s) - START )) -gt 540 ] && { echo "$n skipped (deadline)" >> $S; return; }
  timeout 100 build-gpu/moebench run "$@" --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 6 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^  step |^  experts_fwd|^  experts_bwd|expert GEMMs:|rror" $OUT/logs/$n.log >> $S; }
for w in qwen3_30b_a3b:8192 deepseek_v3:4096 mixtral_8x7b:8192; do
  IFS=: read c t <<< "$w"
  tim ${c}_bf16 --config configs/bench/$c.json --set tokens_per_rank=$t
  for m in lt_multistream grouped_sm90; do
    tim ${c}_fp8_tensor_$m --config configs/bench/$c.json --set precision=fp8_tensor --set tokens_per_rank=$t --set gemm.method=$m
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
