#!/usr/bin/env bash
# Session 17, call 9 (one H200): the grouped kernel's tile search galloping forward from the CTA's last
# group (tree) against bisecting all groups at every tile (HEAD, old/). GPU tests of the
# tree; `moebench gemm` (bf16, grouped_sm90) in the order old, new, new, old on four shape sets.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs old
S="$OUT/summary.txt"
tar xzf devrun/old.tgz -C old
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j10 > /tmp/build.log 2>&1; echo "new rc=$?" >> $S) &
(cd old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake_old.log 2>&1 && cmake --build build-gpu -j6 --target moebench > /tmp/build_old.log 2>&1; echo "old rc=$?" >> $S) &
wait
grep -B2 -A10 " error" /tmp/build.log /tmp/build_old.log | head -30 >> $S
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception" $OUT/logs/gpu_tests.txt | head -20 >> $S
echo "tests at $(( $(date +%s) - START )) s" >> $S
for c in "deepseek_v3 1 4096" "deepseek_v3 2 4096" "qwen3_30b_a3b 1 8192" "mixtral_8x7b 1 8192"; do
  set -- $c
  for b in old new new old; do
    bin=build-gpu/moebench; [ $b = old ] && bin=old/build-gpu/moebench
    n=gemm_$1_ep$2_$b
    timeout 100 $bin gemm --config configs/bench/$1.json --ep $2 --set tokens_per_rank=$3 --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 20 > $OUT/logs/$n.log 2>&1; echo "== $b $1 ep$2 rc=$?" >> $S
    grep -E "^  (up|down|dgrad_a|dgrad_x|wgrad_out|wgrad_in|dense) " $OUT/logs/$n.log | awk '{print $1, $6}' | tr '\n' ' ' >> $S; echo >> $S
  done
  echo "at $(( $(date +%s) - START )) s" >> $S
done
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
