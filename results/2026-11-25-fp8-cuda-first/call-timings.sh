#!/usr/bin/env bash
# FP8 on the CUDA backend: tests, checks, first timings (H100, EP 1).
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $OUT/cmake.log 2>&1
cmake --build build-gpu -j16 > $OUT/build.log 2>&1 || { grep -B2 -A10 error $OUT/build.log | head -60; exit 1; }
build-gpu/tests/moe_cuda_tests --gtest_filter='*Fp8*' > $OUT/fp8_tests.txt 2>&1
grep -E "rel_l2|FAIL|OK \]|exception|Failure|PASSED" $OUT/fp8_tests.txt | head -70
build-gpu/tests/moe_cuda_tests > $OUT/gpu_tests.txt 2>&1; tail -3 $OUT/gpu_tests.txt
B=build-gpu/moebench
S="$OUT/summary.txt"
chk() { n=$1; shift; timeout 240 $B run "$@" --backend cuda --set align=16 --steps 2 --warmup 1 -o $OUT/$n.json > $OUT/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out|dw_sh_in|dw_sh_out) |check:|reference \(" $OUT/$n.log >> $S; }
for p in fp8_tensor fp8_block; do
  chk tiny_$p --config configs/tiny.json --set precision=$p --set model.hidden=256 --set model.ffn=160 --set tokens_per_rank=256
  chk qwen_$p --config configs/bench/qwen3_30b_a3b.json --set precision=$p --set tokens_per_rank=128
  chk ds_$p --config configs/bench/deepseek_v3.json --set precision=$p --set tokens_per_rank=32 --set model.experts=64
done
tim() { n=$1; shift; timeout 240 $B run "$@" --backend cuda --set align=16 --set check=off --steps 10 --warmup 3 -o $OUT/$n.json > $OUT/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^  step |^  experts_fwd|^  experts_bwd|^# throughput|expert GEMMs:" $OUT/$n.log >> $S; }
for w in qwen3_30b_a3b:grouped_sm90:8192 mixtral_8x7b:lt_multistream:8192 deepseek_v3:lt_multistream:4096; do
  IFS=: read c m t <<< "$w"
  tim ${c}_bf16 --config configs/bench/$c.json --set gemm.method=$m --set tokens_per_rank=$t
  tim ${c}_fp8_tensor --config configs/bench/$c.json --set precision=fp8_tensor --set tokens_per_rank=$t
  tim ${c}_fp8_block --config configs/bench/$c.json --set precision=fp8_block --set tokens_per_rank=$t
done
cat $S
