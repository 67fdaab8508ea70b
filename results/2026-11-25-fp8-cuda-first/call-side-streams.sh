#!/usr/bin/env bash
# FP8 GEMMs over side streams with 16-byte plans: tests, a check, the timings again (H100, EP 1).
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1
cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -60; exit 1; }
mkdir -p $OUT/logs
build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; grep -E "FAILED|PASSED" $OUT/logs/gpu_tests.txt | head
B=build-gpu/moebench
S="$OUT/summary.txt"
for p in fp8_tensor fp8_block; do
  timeout 60 $B run --config configs/tiny.json --backend cuda --set align=16 --set precision=$p --set model.hidden=256 --set model.ffn=160 --set tokens_per_rank=256 --steps 2 --warmup 1 > $OUT/logs/tiny_$p.log 2>&1
  echo "== tiny_$p rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out) |check:" $OUT/logs/tiny_$p.log >> $S
done
tim() { n=$1; shift; timeout 120 $B run "$@" --backend cuda --set align=16 --set check=off --steps 10 --warmup 3 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^  step |^  experts_fwd|^  experts_bwd|^# throughput|expert GEMMs:" $OUT/logs/$n.log >> $S; }
for w in qwen3_30b_a3b:8192 mixtral_8x7b:8192 deepseek_v3:4096; do
  IFS=: read c t <<< "$w"
  tim ${c}_fp8_tensor --config configs/bench/$c.json --set precision=fp8_tensor --set tokens_per_rank=$t
  tim ${c}_fp8_block --config configs/bench/$c.json --set precision=fp8_block --set tokens_per_rank=$t
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
