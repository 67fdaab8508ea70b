#!/usr/bin/env bash
# Session 11, call 6 (H100): the committed tree: GPU tests, tiny FP8 checks, moebench gemm output.
set -uo pipefail
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
B=build-gpu/moebench
timeout 250 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "all gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
for p in fp8_tensor fp8_block; do
  timeout 60 $B run --config configs/tiny.json --backend cuda --set align=16 --set precision=$p --set model.hidden=256 --set model.ffn=160 --set tokens_per_rank=256 --steps 2 --warmup 1 > $OUT/logs/tiny_$p.log 2>&1
  echo "== tiny_$p rc=$? $(grep -E '^# check' $OUT/logs/tiny_$p.log)" >> $S
  timeout 60 $B run --config configs/tiny.json --backend cuda --set align=16 --set precision=$p --set model.hidden=256 --set model.ffn=160 --set model.shared_experts=2 --set model.shared_ffn=128 --set overlap=pipeline --set tokens_per_rank=256 --steps 2 --warmup 1 > $OUT/logs/tinysh_$p.log 2>&1
  echo "== tiny shared+pipeline $p rc=$? $(grep -E '^# check' $OUT/logs/tinysh_$p.log)" >> $S
done
timeout 60 $B gemm --config configs/bench/mixtral_8x7b.json --set tokens_per_rank=8192 --set align=16 --set precision=fp8_block --methods lt_multistream --iters 10 > $OUT/logs/gemm.log 2>&1; echo "== gemm rc=$?" >> $S; cat $OUT/logs/gemm.log >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
