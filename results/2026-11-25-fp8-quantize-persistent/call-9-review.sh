#!/usr/bin/env bash
# Session 12, call 9 (one H200): review mend (per-tensor scales inside the one tile runner):
# all GPU tests, tiny FP8 step checks.
set -uo pipefail
mkdir -p $OUT
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
timeout 250 build-gpu/tests/moe_cuda_tests > $OUT/gpu_tests.txt 2>&1; echo "all gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/gpu_tests.txt | tr '\n' ' ')"
for p in fp8_tensor fp8_block; do
  timeout 60 build-gpu/moebench run --config configs/tiny.json --backend cuda --set align=16 --set precision=$p --set model.hidden=256 --set model.ffn=160 --set tokens_per_rank=256 --steps 2 --warmup 1 > $OUT/tiny_$p.log 2>&1
  echo "== tiny_$p rc=$? $(grep -E '^# check' $OUT/tiny_$p.log)"; grep -E "^  (out|dx|dw_in|dw_out) " $OUT/tiny_$p.log
done
