#!/usr/bin/env bash
# Session 14, call 5 (one H200): fp8_tensor's amax of a and dh found by the SwiGLU kernels (the
# tree) against HEAD 54641ba (a separate amax pass): all GPU tests, tiny FP8 checks, the Qwen3 check,
# steps of both builds in turn (EP 1, bf16 expert gradients, median of 20).
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs old
S="$OUT/summary.txt"
tar xzf devrun/old.tgz -C old
B() { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake-$1.log 2>&1 && cmake --build build-gpu -j8 > /tmp/build-$1.log 2>&1; }
B tree & (cd old && B old) &
wait
for d in . old; do [ -x $d/build-gpu/moebench ] || { echo "build $d failed"; grep -B2 -A10 error /tmp/build-*.log | head -30; exit 1; }; done
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception|Expected|Which is" $OUT/logs/gpu_tests.txt | head -20 >> $S
grep -E "Fp8SwigluAmax" $OUT/logs/gpu_tests.txt | head -3 >> $S
for p in fp8_tensor:grouped_sm90 fp8_tensor:lt_multistream fp8_block:auto; do
  IFS=: read pr m <<< "$p"
  timeout 60 build-gpu/moebench run --config configs/tiny.json --backend cuda --set precision=$pr --set align=16 --set gemm.method=$m --steps 3 > $OUT/logs/tiny_${pr}_$m.log 2>&1; echo "== tiny $pr $m rc=$?" >> $S
  grep -E "^  (out|dx|dw_in|dw_out) |^# check" $OUT/logs/tiny_${pr}_$m.log | head -6 >> $S
done
timeout 200 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --backend cuda --set precision=fp8_tensor --set tokens_per_rank=256 --set align=16 --set check=first --steps 2 --warmup 1 -o $OUT/logs/qwen3_check.json > $OUT/logs/qwen3_check.log 2>&1; echo "== qwen3 check fp8_tensor auto rc=$?" >> $S
grep -E "^  [a-z_]+ +[0-9].*(PASS|FAIL)|^# check|expert GEMMs:" $OUT/logs/qwen3_check.log >> $S
echo "at $(( $(date +%s) - START )) s" >> $S
tim() { b=$1; n=$2; shift 2; [ $(( $(date +%s) - START )) -gt 540 ] && { echo "$n skipped (deadline)" >> $S; return; }
  timeout 100 $b/build-gpu/moebench run "$@" --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 6 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^  step |^  experts_fwd|^  experts_bwd|expert GEMMs:|rror" $OUT/logs/$n.log >> $S; }
M="--config configs/bench/mixtral_8x7b.json --set tokens_per_rank=8192"
Q="--config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=8192"
tim . mixtral_bf16 $M
for r in 1 2; do
  tim old mixtral_fp8_old_$r $M --set precision=fp8_tensor --set gemm.method=lt_multistream
  tim . mixtral_fp8_tree_$r $M --set precision=fp8_tensor --set gemm.method=lt_multistream
done
tim . mixtral_bf16_2 $M
for r in 1 2; do
  tim old qwen3_fp8_old_$r $Q --set precision=fp8_tensor --set gemm.method=grouped_sm90
  tim . qwen3_fp8_tree_$r $Q --set precision=fp8_tensor --set gemm.method=grouped_sm90
done
echo "at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
