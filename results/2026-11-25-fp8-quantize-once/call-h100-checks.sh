#!/usr/bin/env bash
# Session 11, call 4 (H100): codes computed once where both orientations share a scale. GPU
# tests, the FP8 GEMM split on Mixtral, the check on Qwen3-30B-A3B's layer with both recipes.
set -uo pipefail
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
B=build-gpu/moebench
chk() { n=$1; shift; timeout 280 $B run "$@" --backend cuda --set align=16 --set check=first --steps 2 --warmup 1 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out|dw_sh_in|dw_sh_out) |check:" $OUT/logs/$n.log >> $S; }
chk qwen_fp8_tensor --config configs/bench/qwen3_30b_a3b.json --set precision=fp8_tensor --set tokens_per_rank=256 &
chk qwen_fp8_block --config configs/bench/qwen3_30b_a3b.json --set precision=fp8_block --set tokens_per_rank=256 &
timeout 250 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "all gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Which is|mismatch" $OUT/logs/gpu_tests.txt | head >> $S
for p in fp8_block fp8_tensor; do
  timeout 90 $B gemm --config configs/bench/mixtral_8x7b.json --set tokens_per_rank=8192 --set align=16 --set expert_grad_dtype=bf16 --set precision=$p --methods lt_multistream --iters 10 > $OUT/logs/gemm_mixtral_$p.log 2>&1
  echo "== gemm mixtral $p rc=$?" >> $S; grep fp8 $OUT/logs/gemm_mixtral_$p.log | cut -c1-110 >> $S
done
wait
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
