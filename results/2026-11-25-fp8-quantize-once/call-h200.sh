#!/usr/bin/env bash
# Session 11, call 5 (one H200): GPU tests; the FP8 GEMM split per workload; the step in bf16,
# fp8_tensor and fp8_block on the three bench workloads (EP 1, bf16 expert gradients, median of 20).
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
B=build-gpu/moebench
timeout 250 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "all gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
tim() { n=$1; shift; [ $(( $(date +%s) - START )) -gt 520 ] && { echo "$n skipped (deadline)" >> $S; return; }
  timeout 120 $B run "$@" --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 5 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^  step |^  experts_fwd|^  experts_bwd|rror" $OUT/logs/$n.log >> $S; }
for w in mixtral_8x7b:8192 qwen3_30b_a3b:8192 deepseek_v3:4096; do
  IFS=: read c t <<< "$w"
  for p in bf16 fp8_tensor fp8_block; do tim ${c}_$p --config configs/bench/$c.json --set precision=$p --set tokens_per_rank=$t; done
done
for w in mixtral_8x7b:8192:1 deepseek_v3:4096:2 qwen3_30b_a3b:8192:1; do
  IFS=: read c t ep <<< "$w"
  for p in fp8_block fp8_tensor; do
    [ $(( $(date +%s) - START )) -gt 540 ] && { echo "gemm $c $p skipped" >> $S; continue; }
    timeout 60 $B gemm --config configs/bench/$c.json --ep $ep --set tokens_per_rank=$t --set align=16 --set expert_grad_dtype=bf16 --set precision=$p --methods lt_multistream --iters 10 -o $OUT/logs/gemm_${c}_ep${ep}_$p.json > $OUT/logs/gemm_${c}_ep${ep}_$p.log 2>&1
    echo "== gemm $c ep$ep $p rc=$?" >> $S; grep -E "fp8|dense" $OUT/logs/gemm_${c}_ep${ep}_$p.log | cut -c1-110 >> $S
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
