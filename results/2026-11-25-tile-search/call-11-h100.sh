#!/usr/bin/env bash
# Session 17, call 11 (one H100): the tree (per-GEMM choice, its keys, the galloping tile search)
# on an H100: GPU tests, the step's check on our kernel (bf16 GPU reference; fp8_block on tiny),
# and the A/B of the weight gradients on DeepSeek-V3's EP 2 shapes (old, new, new, old).
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs old
S="$OUT/summary.txt"
tar xzf devrun/old.tgz -C old
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j10 > /tmp/build.log 2>&1; echo "new rc=$?" >> $S) &
(cd old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake_old.log 2>&1 && cmake --build build-gpu -j6 --target moebench > /tmp/build_old.log 2>&1; echo "old rc=$?" >> $S) &
wait
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception" $OUT/logs/gpu_tests.txt | head -20 >> $S
chk() {
  n=$1; shift
  timeout 120 build-gpu/moebench run "$@" --backend cuda --set align=16 --out $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S
  grep -E '^# expert GEMMs|^# check' $OUT/logs/$n.log | cut -c1-250 >> $S
}
chk qwen3_bf16_sm90 --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=256 --set check=every --steps 2 --warmup 2 --set reference=gpu --set gemm.method=grouped_sm90
chk deepseek64_bf16_sm90 --config configs/bench/deepseek_v3.json --set model.experts=64 --set tokens_per_rank=2048 --set check=first --steps 2 --warmup 2 --set reference=gpu --set gemm.method=grouped_sm90
chk tiny_fp8_block_mix --config configs/tiny.json --set check=every --steps 4 --warmup 2 --set precision=fp8_block --set gemm.method=grouped_sm90 --set gemm.method_wgrad_in=lt_multistream
chk tiny_bf16_auto --config configs/tiny.json --set check=every --steps 4 --warmup 2
echo "checks at $(( $(date +%s) - START )) s" >> $S
for b in old new new old; do
  bin=build-gpu/moebench; [ $b = old ] && bin=old/build-gpu/moebench
  timeout 100 $bin gemm --config configs/bench/deepseek_v3.json --ep 2 --set tokens_per_rank=4096 --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 20 > $OUT/logs/gemm_$b.log 2>&1; echo "== $b deepseek_v3 ep2 rc=$?" >> $S
  grep -E "^  (up|down|dgrad_a|dgrad_x|wgrad_out|wgrad_in|dense) " $OUT/logs/gemm_$b.log | awk '{print $1, $6}' | tr '\n' ' ' >> $S; echo >> $S
done
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
