#!/usr/bin/env bash
# Session 13, call 13 (one H200): the review mend (tests' shared helpers, moebench gemm's row
# setup). All GPU tests; moebench gemm fp8_tensor per method on Qwen3-30B-A3B.
set -uo pipefail
mkdir -p $OUT
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception|largest error" $OUT/gpu_tests.txt | head -24 >> $S
timeout 80 build-gpu/moebench gemm --config configs/bench/qwen3_30b_a3b.json --ep 1 --set tokens_per_rank=8192 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods lt_multistream,grouped_sm90 --iters 5 > $OUT/gemm.log 2>&1; echo "gemm rc=$?" >> $S
grep -E "^#|fp8|dense" $OUT/gemm.log | cut -c1-110 >> $S
cat $S
