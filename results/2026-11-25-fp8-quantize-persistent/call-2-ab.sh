#!/usr/bin/env bash
# Session 12, call 2 (one H200): tiles without a branch per value (a tile-wide tiny-value flag),
# scales by one thread each. Builds this tree and c64e1c2 (old/); FP8 GPU tests; `moebench gemm`
# FP8 for both builds on Mixtral-8x7B and Qwen3-30B-A3B; steps (EP 1, bf16 grads, median of 20).
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs old
S="$OUT/summary.txt"
tar xzf devrun/old.tgz -C old
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j10 > /tmp/build.log 2>&1 ) &
( cd old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake-old.log 2>&1 && cmake --build build-gpu -j6 > /tmp/build-old.log 2>&1 ) &
wait
[ -x build-gpu/moebench ] || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
echo "built at $(( $(date +%s) - START )) s; old: $(ls old/build-gpu/moebench)" >> $S
timeout 120 build-gpu/tests/moe_cuda_tests --gtest_filter='*Fp8*:*FP8*:*fp8*' > $OUT/logs/fp8_tests.txt 2>&1; echo "fp8 gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/fp8_tests.txt | tr '\n' ' ')" >> $S
grep -E "FAILED|Failure|Expected|Which is" $OUT/logs/fp8_tests.txt | head -20 >> $S
for w in mixtral_8x7b:8192:1 qwen3_30b_a3b:8192:1; do
  IFS=: read c t ep <<< "$w"
  for p in fp8_block fp8_tensor; do
    for b in old/build-gpu build-gpu; do
      n=gemm_${c}_${p}_$(echo $b | tr '/' '_')
      timeout 60 $b/moebench gemm --config configs/bench/$c.json --ep $ep --set tokens_per_rank=$t --set align=16 --set expert_grad_dtype=bf16 --set precision=$p --methods lt_multistream --iters 10 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1
      echo "== $n rc=$?" >> $S; grep -E "fp8" $OUT/logs/$n.log | cut -c1-120 >> $S
    done
  done
done
tim() { b=$1; n=$2; shift 2; [ $(( $(date +%s) - START )) -gt 540 ] && { echo "$n skipped (deadline)" >> $S; return; }
  timeout 100 $b/moebench run "$@" --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 5 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^  step |^  experts_fwd|^  experts_bwd|rror" $OUT/logs/$n.log >> $S; }
for w in mixtral_8x7b:8192 qwen3_30b_a3b:8192 deepseek_v3:4096; do
  IFS=: read c t <<< "$w"
  for p in bf16 fp8_tensor fp8_block; do tim build-gpu ${c}_$p --config configs/bench/$c.json --set precision=$p --set tokens_per_rank=$t; done
  for p in fp8_tensor fp8_block; do tim old/build-gpu old_${c}_$p --config configs/bench/$c.json --set precision=$p --set tokens_per_rank=$t; done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
