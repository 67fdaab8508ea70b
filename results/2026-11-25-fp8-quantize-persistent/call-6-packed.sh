#!/usr/bin/env bash
# Session 12, call 6 (one H200): the tile kernel's magnitudes packed two to a word (bf16 bits,
# max/min on halfwords) against the committed tree (old/): FP8 GPU tests, then `moebench gemm`
# FP8 on Mixtral-8x7B and Qwen3-30B-A3B for both builds, alternating.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs old
S="$OUT/summary.txt"
tar xzf devrun/old.tgz -C old
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j10 > /tmp/build.log 2>&1 ) &
( cd old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake-old.log 2>&1 && cmake --build build-gpu -j6 --target moebench > /tmp/build-old.log 2>&1 ) &
wait
[ -x build-gpu/moebench ] || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
timeout 120 build-gpu/tests/moe_cuda_tests --gtest_filter='*Fp8*:*FP8*:*fp8*' > $OUT/logs/fp8_tests.txt 2>&1; echo "fp8 gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/fp8_tests.txt | tr '\n' ' ')" >> $S
grep -E "FAILED|Failure|Expected|Which is" $OUT/logs/fp8_tests.txt | head -20 >> $S
for rep in 1 2; do
for w in mixtral_8x7b:8192 qwen3_30b_a3b:8192; do
  IFS=: read c t <<< "$w"
  for p in fp8_block fp8_tensor; do
    for b in old/build-gpu build-gpu; do
      n=gemm_${c}_${p}_$(echo $b | tr '/' '_')_$rep
      timeout 60 $b/moebench gemm --config configs/bench/$c.json --set tokens_per_rank=$t --set align=16 --set expert_grad_dtype=bf16 --set precision=$p --methods lt_multistream --iters 10 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1
      echo "== $n rc=$? quant ms: $(grep -E 'fp8' $OUT/logs/$n.log | awk '{printf "%s %s; ", $1, $NF}')" >> $S
    done
  done
done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
