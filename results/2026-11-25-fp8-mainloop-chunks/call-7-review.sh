#!/usr/bin/env bash
# Session 14, call 7 (one H200): the review mend d90af39 (fuses_swiglu, the given amax from the GroupAmax;
# host code only): all GPU tests, tiny checks, the Qwen3 FP8 check, one Mixtral-8x7B FP8 step run.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception" $OUT/logs/gpu_tests.txt | head -20 >> $S
for p in bf16:auto fp8_tensor:grouped_sm90 fp8_tensor:lt_multistream fp8_block:auto; do
  IFS=: read pr m <<< "$p"
  timeout 60 build-gpu/moebench run --config configs/tiny.json --backend cuda --set precision=$pr --set align=16 --set gemm.method=$m --steps 3 > $OUT/logs/tiny_${pr}_$m.log 2>&1; echo "== tiny $pr $m rc=$?" >> $S
  grep -E "^  (out|dx) |^# check" $OUT/logs/tiny_${pr}_$m.log | head -3 >> $S
done
timeout 150 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=256 --set gemm.method=grouped_sm90 --set check=first --steps 2 --warmup 1 --backend cuda --set align=16 --set precision=fp8_tensor > $OUT/logs/qwen3_check.log 2>&1; echo "== qwen3 check fp8_tensor grouped_sm90 rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out) |^# check" $OUT/logs/qwen3_check.log >> $S
timeout 100 build-gpu/moebench run --config configs/bench/mixtral_8x7b.json --set tokens_per_rank=8192 --set precision=fp8_tensor --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 6 > $OUT/logs/mixtral_fp8.log 2>&1; echo "== mixtral fp8_tensor auto rc=$?" >> $S
grep -E "^  step |^  experts_fwd|^  experts_bwd|expert GEMMs:" $OUT/logs/mixtral_fp8.log >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
