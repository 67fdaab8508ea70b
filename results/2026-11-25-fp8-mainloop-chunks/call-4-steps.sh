#!/usr/bin/env bash
# Session 14, call 4 (one H200): the tree. FP8 GEMMs on the grouped kernel in clusters of 1 and 2
# (twice, in turn); steps with gemm.method auto, bf16 and fp8_tensor (EP 1, bf16 expert gradients,
# median of 20), and fp8_tensor on grouped_sm90 in clusters of 2.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 --target moebench > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built at $(( $(date +%s) - START )) s" >> $S
for c in mixtral_8x7b deepseek_v3 qwen3_30b_a3b; do
  T=8192; [ $c = deepseek_v3 ] && T=4096
  for k in 1 2 1 2; do
    echo "== gemm $c cluster $k" >> $S
    timeout 80 build-gpu/moebench gemm --config configs/bench/$c.json --ep 1 --set tokens_per_rank=$T --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --set gemm.sm90_cluster=$k --methods grouped_sm90 --iters 10 > $OUT/logs/g.log 2>&1; grep -E "fp8_tensor:|dense" $OUT/logs/g.log | cut -c1-100 >> $S
  done
done
echo "at $(( $(date +%s) - START )) s" >> $S
tim() { n=$1; shift 1; [ $(( $(date +%s) - START )) -gt 520 ] && { echo "$n skipped (deadline)" >> $S; return; }
  timeout 100 build-gpu/moebench run "$@" --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 6 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^  step |^  experts_fwd|^  experts_bwd|expert GEMMs:|rror" $OUT/logs/$n.log >> $S; }
tim mixtral_fp8_grouped_c2 --config configs/bench/mixtral_8x7b.json --set precision=fp8_tensor --set tokens_per_rank=8192 --set gemm.method=grouped_sm90 --set gemm.sm90_cluster=2
for w in mixtral_8x7b:8192 deepseek_v3:4096 qwen3_30b_a3b:8192; do
  IFS=: read c t <<< "$w"
  tim ${c}_bf16 --config configs/bench/$c.json --set tokens_per_rank=$t
  tim ${c}_fp8_tensor_auto --config configs/bench/$c.json --set precision=fp8_tensor --set tokens_per_rank=$t
done
echo "at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
