#!/usr/bin/env bash
# Session 17, call 10 (one H200): call 9's A/B again in the other order (new, old, old, new) on
# Mixtral-8x7B and DeepSeek-V3 at EP 2, where call 9's order may have favoured the last run.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs old
S="$OUT/summary.txt"
[ -x old/build-gpu/moebench ] || { tar xzf devrun/old.tgz -C old; (cd old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake_old.log 2>&1 && cmake --build build-gpu -j8 --target moebench > /tmp/build_old.log 2>&1); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j8 --target moebench > /tmp/build.log 2>&1; echo "new rc=$?" >> $S
echo "built at $(( $(date +%s) - START )) s" >> $S
for c in "mixtral_8x7b 1 8192" "deepseek_v3 2 4096" "mixtral_8x7b 1 8192"; do
  set -- $c
  for b in new old old new; do
    bin=build-gpu/moebench; [ $b = old ] && bin=old/build-gpu/moebench
    n=gemm_$1_ep$2_$b
    timeout 100 $bin gemm --config configs/bench/$1.json --ep $2 --set tokens_per_rank=$3 --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 20 > $OUT/logs/$n.log 2>&1; echo "== $b $1 ep$2 rc=$?" >> $S
    grep -E "^  (up|down|dgrad_a|dgrad_x|wgrad_out|wgrad_in|dense) " $OUT/logs/$n.log | awk '{print $1, $6}' | tr '\n' ' ' >> $S; echo >> $S
  done
done
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
