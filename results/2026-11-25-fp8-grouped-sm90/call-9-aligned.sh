#!/usr/bin/env bash
# Session 13, call 9 (one H200): FP8 weight-gradient test with 16-aligned group starts; then a
# probe (test edited here only) with unaligned starts, to see whether they caused call 8's fault.
set -uo pipefail
mkdir -p $OUT
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 --target moe_cuda_tests > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception|largest error" $OUT/gpu_tests.txt | head -30 >> $S
sed -i 's/const std::vector<int64_t> rows = {0, 16, 128, 144, 304, 16, 0, 256, 37};/const std::vector<int64_t> rows = {0, 1, 127, 128, 129, 300, 17, 0, 256};/' tests/cuda/test_grouped_gemm_fp8_cuda.cu
cmake --build build-gpu -j16 --target moe_cuda_tests > /tmp/build2.log 2>&1
timeout 60 build-gpu/tests/moe_cuda_tests --gtest_filter='*WeightGradientsMatchTheDecoded*' > $OUT/probe.txt 2>&1; echo "probe unaligned rc=$?" >> $S
grep -E "Failure|exception|largest error|OK|FAILED" $OUT/probe.txt | head -10 >> $S
cat $S
