#!/usr/bin/env bash
# Session 9, call 8 (one H200): clusters of 2 (TMA multicast of the weights) against single CTAs, per GEMM.
set -uo pipefail
T0=$(date +%s)
L=$(mktemp -d)
S=$OUT/summary.txt
nvidia-smi --query-gpu=name --format=csv,noheader > $S
[ -x build-gpu/moebench ] || { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 && cmake --build build-gpu -j16 --target moebench > $L/build.log 2>&1; }
B=build-gpu/moebench
for spec in "qwen3_30b_a3b 1 8192" "deepseek_v3 2 4096" "mixtral_8x7b 1 8192" "deepseek_v3 1 4096"; do
  set -- $spec
  for c in 1 2 2 1; do
    timeout 150 $B gemm --config configs/bench/$1.json --ep $2 --set tokens_per_rank=$3 --set expert_grad_dtype=bf16 --set gemm.sm90_cluster=$c --methods grouped_sm90 --iters 20 > $L/g_$1_$2_$c.txt 2>&1
    echo "$1 ep$2 cluster $c rc=$? $(grep -E '^  (up|down|dgrad|wgrad)' $L/g_$1_$2_$c.txt | awk '{printf "%s %s | ", $1, $6}') $(grep dense $L/g_$1_$2_$c.txt | awk '{print "dense", $6}')" >> $S
  done
done
echo "all done after $(( $(date +%s) - T0 )) s" >> $S
cat $S
