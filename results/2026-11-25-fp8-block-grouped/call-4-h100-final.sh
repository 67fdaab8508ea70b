#!/usr/bin/env bash
# Session 16, call 4 (one H100): the final tree (85977fb). GPU tests; tiny checks of fp8_block on the
# grouped kernel through the variants (graph, pipeline, dispatch fp8, a shared expert); the Qwen3-30B-A3B
# check at 256 tokens in the sync-free step; steps bf16 / fp8_tensor / fp8_block on Qwen3-30B-A3B and
# Mixtral-8x7B.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception" $OUT/logs/gpu_tests.txt | head -20 >> $S
grep -E "largest error" $OUT/logs/gpu_tests.txt | grep -E "^  block" | sort -k7 -g | tail -2 >> $S
B="build-gpu/moebench run --config configs/tiny.json --backend cuda --set precision=fp8_block --set align=16 --steps 4 --warmup 2 --set check=every"
for v in "gemm.method=grouped_sm90" "graph=true" "gemm.method=grouped_sm90 --set overlap=pipeline" "graph=true --set dispatch_dtype=fp8" "graph=true --set dispatch=allgather --set model.shared_experts=1 --set model.shared_ffn=32"; do
  n=tiny_$(echo $v | tr -c 'a-z0-9_\n' '_')
  timeout 60 $B --set $v --out $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $v rc=$? $(grep -E '^# check' $OUT/logs/$n.log)" >> $S; grep -E '^# expert GEMMs' $OUT/logs/$n.log | cut -c1-60 >> $S
  grep -E "^  (out|dx|dw_in|dw_out) " $OUT/logs/$n.log | tr -s ' ' | tr '\n' ';' >> $S; echo >> $S
done
timeout 150 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=256 --set check=first --steps 2 --warmup 2 --backend cuda --set align=16 --set precision=fp8_block --set graph=true > $OUT/logs/qwen3_check.log 2>&1; echo "== qwen3 check fp8_block graph rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out) |^# check" $OUT/logs/qwen3_check.log >> $S
echo "checks at $(( $(date +%s) - START )) s" >> $S
for c in "qwen3_30b_a3b 8192" "mixtral_8x7b 8192"; do
  set -- $c
  for v in "precision=bf16" "precision=fp8_tensor" "precision=fp8_block" "precision=fp8_block --set graph=true"; do
    n=step_$1_$(echo $v | tr -c 'a-z0-9_\n' '_')
    timeout 100 build-gpu/moebench run --config configs/bench/$1.json --set tokens_per_rank=$2 --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 15 --warmup 5 --set $v --out $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $1 $v rc=$?" >> $S; grep -E '^# expert GEMMs' $OUT/logs/$n.log | cut -c1-150 >> $S
    grep -E "^  step |^  experts_fwd|^  experts_bwd" $OUT/logs/$n.log >> $S
  done
done
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
