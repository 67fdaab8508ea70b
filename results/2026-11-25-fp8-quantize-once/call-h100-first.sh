#!/usr/bin/env bash
# Session 11, call 1: FP8 tile quantization kernel (both orientations), weights once per step,
# moebench gemm with FP8. Tests, tiny checks, gemm split, step timings (EP 1).
set -uo pipefail
START=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1
cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -60; exit 1; }
mkdir -p $OUT/logs
S="$OUT/summary.txt"
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
timeout 200 build-gpu/tests/moe_cuda_tests --gtest_filter='*Fp8*' > $OUT/logs/gpu_tests_fp8.txt 2>&1; echo "fp8 tests rc=$?" >> $S
grep -E "^\[  (FAILED|PASSED)|Failure|mismatch|Expected|Which is" $OUT/logs/gpu_tests_fp8.txt | head -30 >> $S
B=build-gpu/moebench
for p in fp8_tensor fp8_block; do
  timeout 60 $B run --config configs/tiny.json --backend cuda --set align=16 --set precision=$p --set model.hidden=256 --set model.ffn=160 --set tokens_per_rank=256 --steps 2 --warmup 1 > $OUT/logs/tiny_$p.log 2>&1
  echo "== tiny_$p rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out) |check:|rror" $OUT/logs/tiny_$p.log >> $S
  timeout 60 $B run --config configs/tiny.json --backend cuda --set align=16 --set precision=$p --set model.hidden=256 --set model.ffn=160 --set model.shared_experts=2 --set model.shared_ffn=96 --set overlap=pipeline --set tokens_per_rank=256 --steps 2 --warmup 1 > $OUT/logs/tinysh_$p.log 2>&1
  echo "== tiny shared+pipeline $p rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out|dw_sh_in|dw_sh_out) |check:|rror" $OUT/logs/tinysh_$p.log >> $S
done
for w in mixtral_8x7b:8192:1 deepseek_v3:4096:1 deepseek_v3:4096:2 qwen3_30b_a3b:8192:1; do
  IFS=: read c t ep <<< "$w"
  for p in fp8_block fp8_tensor; do
    [ $(( $(date +%s) - START )) -gt 420 ] && { echo "gemm $c $p skipped" >> $S; continue; }
    timeout 90 $B gemm --config configs/bench/$c.json --ep $ep --set tokens_per_rank=$t --set align=16 --set expert_grad_dtype=bf16 --set precision=$p --methods lt_multistream --iters 10 > $OUT/logs/gemm_${c}_${ep}_$p.log 2>&1
    echo "== gemm $c ep$ep $p rc=$?" >> $S; cat $OUT/logs/gemm_${c}_${ep}_$p.log | cut -c1-110 >> $S
  done
done
tim() { n=$1; shift; [ $(( $(date +%s) - START )) -gt 500 ] && { echo "$n skipped" >> $S; return; }
  timeout 100 $B run "$@" --backend cuda --set align=16 --set check=off --steps 10 --warmup 3 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^  step |^  experts_fwd|^  experts_bwd|rror" $OUT/logs/$n.log >> $S; }
for w in mixtral_8x7b:8192 qwen3_30b_a3b:8192 deepseek_v3:4096; do
  IFS=: read c t <<< "$w"
  for p in bf16 fp8_block; do tim ${c}_$p --config configs/bench/$c.json --set precision=$p --set tokens_per_rank=$t; done
done
timeout 250 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "all gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
