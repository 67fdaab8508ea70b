#!/usr/bin/env bash
# Session 16, call 3 (one H200): fp8_block's row scales loaded at each chunk's start and multiplied at
# the add (tree) against loaded and multiplied as each stage is issued (c25a1b4, old/); GPU tests of the
# tree; steps bf16 / fp8_tensor / fp8_block (auto, and fp8_block in the sync-free step) on three workloads.
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
grep -E "fp8_block grad .* grouped_sm90 (h|dxe|dw_in) " $OUT/logs/gpu_tests.txt >> $S
echo "tests at $(( $(date +%s) - START )) s" >> $S
timeout 150 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=256 --set check=first --steps 2 --warmup 2 --backend cuda --set align=16 --set precision=fp8_block --set graph=true > $OUT/logs/qwen3_check.log 2>&1; echo "== qwen3 check fp8_block graph rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out) |^# check" $OUT/logs/qwen3_check.log >> $S
for c in "mixtral_8x7b 1 8192" "deepseek_v3 2 4096" "qwen3_30b_a3b 1 8192"; do
  set -- $c
  for b in old new new old; do
    bin=build-gpu/moebench; [ $b = old ] && bin=old/build-gpu/moebench
    timeout 90 $bin gemm --config configs/bench/$1.json --ep $2 --set tokens_per_rank=$3 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_block --methods grouped_sm90 --iters 10 > $OUT/logs/gemm_$1_$b.log 2>&1; echo "== $b gemm $1 fp8_block rc=$?" >> $S
    grep -E "fp8_block:" $OUT/logs/gemm_$1_$b.log | awk '{print $1, $6}' | tr '\n' ' ' >> $S; echo >> $S
  done
  timeout 90 build-gpu/moebench gemm --config configs/bench/$1.json --ep $2 --set tokens_per_rank=$3 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods grouped_sm90 --iters 10 > $OUT/logs/gemm_$1_tensor.log 2>&1; echo "== new gemm $1 fp8_tensor rc=$?" >> $S
  grep -E "fp8_tensor:" $OUT/logs/gemm_$1_tensor.log | awk '{print $1, $6}' | tr '\n' ' ' >> $S; echo >> $S
done
echo "gemm at $(( $(date +%s) - START )) s" >> $S
for c in "qwen3_30b_a3b 8192" "mixtral_8x7b 8192" "deepseek_v3 4096"; do
  set -- $c
  for v in "precision=bf16" "precision=fp8_tensor" "precision=fp8_block" "precision=fp8_block --set gemm.method=grouped_sm90" "precision=fp8_block --set graph=true"; do
    n=step_$1_$(echo $v | tr -c 'a-z0-9_\n' '_')
    timeout 100 build-gpu/moebench run --config configs/bench/$1.json --set tokens_per_rank=$2 --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 15 --warmup 5 --set $v --out $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $1 $v rc=$?" >> $S; grep -E '^# expert GEMMs' $OUT/logs/$n.log | cut -c1-150 >> $S
    grep -E "^  step |^  experts_fwd|^  experts_bwd" $OUT/logs/$n.log >> $S
  done
  echo "at $(( $(date +%s) - START )) s" >> $S
done
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
