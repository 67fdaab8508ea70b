#!/usr/bin/env bash
# Session 16, call 1 (one H200): fp8_block's scales in the grouped sm90 kernel. GPU tests (the new
# block-scale kernel tests, the FFN on the grouped kernel with both recipes), tiny checks of fp8_block
# on grouped_sm90 with and without graph / pipeline / dispatch fp8, the Qwen3-30B-A3B check at 256
# tokens, `moebench gemm` fp8_block per method, and steps bf16 / fp8_block lt / grouped / auto.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 120 build-gpu/tests/moe_cuda_tests --gtest_filter='GroupedGemmSm90Fp8.*:ExpertFfnFp8Cuda.*' > $OUT/logs/fp8_tests.txt 2>&1; echo "fp8 tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/fp8_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception|largest error|rel_l2" $OUT/logs/fp8_tests.txt | grep -E "FAILED|Failure|exception|block|fp8_block" | head -60 >> $S
echo "tests at $(( $(date +%s) - START )) s" >> $S
B="build-gpu/moebench run --config configs/tiny.json --backend cuda --set precision=fp8_block --set align=16 --steps 4 --warmup 2 --set check=every"
for v in "gemm.method=lt_multistream" "gemm.method=grouped_sm90" "graph=true" "gemm.method=grouped_sm90 --set overlap=pipeline" "graph=true --set dispatch_dtype=fp8" "gemm.method=grouped_sm90 --set dispatch_dtype=fp8" "graph=true --set dispatch=allgather --set model.shared_experts=1"; do
  n=tiny_$(echo $v | tr -c 'a-z0-9_\n' '_')
  timeout 60 $B --set $v --out $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $v rc=$? $(grep -E "^# check" $OUT/logs/$n.log)" >> $S; grep -E '^# expert GEMMs' $OUT/logs/$n.log | cut -c1-150 >> $S
  grep -E "^  (out|dx|dw_in|dw_out) " $OUT/logs/$n.log | tr -s ' ' | tr '\n' ';' >> $S; echo >> $S
  grep -iE "error|refuse" $OUT/logs/$n.log | head -3 >> $S
done
for v in "gemm.method=grouped_sm90" "graph=true"; do
  n=qwen3_check_$(echo $v | tr -c 'a-z0-9_\n' '_')
  timeout 150 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=256 --set check=first --steps 3 --warmup 2 --backend cuda --set align=16 --set precision=fp8_block --set $v > $OUT/logs/$n.log 2>&1; echo "== qwen3 check fp8_block $v rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out) |^# check" $OUT/logs/$n.log >> $S
done
echo "checks at $(( $(date +%s) - START )) s" >> $S
for c in "qwen3_30b_a3b 1 8192" "deepseek_v3 2 4096" "mixtral_8x7b 1 8192"; do
  set -- $c
  timeout 90 build-gpu/moebench gemm --config configs/bench/$1.json --ep $2 --set tokens_per_rank=$3 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_block --methods lt_multistream,grouped_sm90 --iters 10 > $OUT/logs/gemm_$1.log 2>&1; echo "== gemm $1 ep $2 rc=$?" >> $S
  grep -E "fp8_block:|dense|weights" $OUT/logs/gemm_$1.log | cut -c1-110 >> $S
done
echo "gemm at $(( $(date +%s) - START )) s" >> $S
for c in "qwen3_30b_a3b 8192" "mixtral_8x7b 8192" "deepseek_v3 4096"; do
  set -- $c
  for v in "precision=bf16" "precision=fp8_block --set gemm.method=lt_multistream" "precision=fp8_block --set gemm.method=grouped_sm90" "precision=fp8_block" "precision=fp8_block --set graph=true"; do
    n=step_$1_$(echo $v | tr -c 'a-z0-9_\n' '_')
    timeout 100 build-gpu/moebench run --config configs/bench/$1.json --set tokens_per_rank=$2 --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 15 --warmup 5 --set $v --out $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $1 $v rc=$?" >> $S; grep -E '^# expert GEMMs' $OUT/logs/$n.log | cut -c1-150 >> $S
    grep -E "^  step |^  experts_fwd|^  experts_bwd" $OUT/logs/$n.log >> $S
  done
  echo "at $(( $(date +%s) - START )) s" >> $S
done
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
