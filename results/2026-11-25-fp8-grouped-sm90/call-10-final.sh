#!/usr/bin/env bash
# Session 13, call 10 (one H200): the final tree. All GPU tests; tiny FP8 checks; the Qwen3-30B-A3B
# check with every FP8 GEMM on the grouped kernel; steps with gemm.method auto (EP 1, bf16 expert
# gradients, median of 20).
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception" $OUT/logs/gpu_tests.txt | head -20 >> $S
for p in fp8_tensor:grouped_sm90 fp8_block:auto; do
  IFS=: read pr m <<< "$p"
  timeout 60 build-gpu/moebench run --config configs/tiny.json --backend cuda --set precision=$pr --set align=16 --set gemm.method=$m --steps 3 > $OUT/logs/tiny_${pr}_$m.log 2>&1; echo "== tiny $pr $m rc=$?" >> $S
  grep -E "^  (out|dx|dw_in|dw_out) |^# check|runs .* instead|expert GEMMs:" $OUT/logs/tiny_${pr}_$m.log | head -8 >> $S
done
tim() { n=$1; shift 1; [ $(( $(date +%s) - START )) -gt 330 ] && { echo "$n skipped (deadline)" >> $S; return; }
  timeout 100 build-gpu/moebench run "$@" --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 6 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^  step |^  experts_fwd|^  experts_bwd|expert GEMMs:|rror" $OUT/logs/$n.log >> $S; }
for w in qwen3_30b_a3b:8192 deepseek_v3:4096 mixtral_8x7b:8192; do
  IFS=: read c t <<< "$w"
  tim ${c}_bf16 --config configs/bench/$c.json --set tokens_per_rank=$t
  tim ${c}_fp8_tensor_auto --config configs/bench/$c.json --set precision=fp8_tensor --set tokens_per_rank=$t
done
echo "at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --backend cuda --set precision=fp8_tensor --set tokens_per_rank=256 --set gemm.method=grouped_sm90 --set align=16 --set check=first --steps 2 --warmup 1 -o $OUT/logs/qwen3_check.json > $OUT/logs/qwen3_check.log 2>&1; echo "== qwen3 check fp8_tensor grouped_sm90 rc=$?" >> $S
grep -E "^  [a-z_]+ +[0-9].*(PASS|FAIL)|^# check|expert GEMMs:" $OUT/logs/qwen3_check.log >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
