#!/usr/bin/env bash
# Prepared for the next session (one H200 is enough; not run): quant-tiny-test.diff, a GPU test
# of the quantization kernels on values below kFp8TinyValue and a group whose scales fall below
# kFp8TinyScale (the exact quotient path, which no GPU test reached), both recipes, both
# orientations from one pass, against the CPU twin bit for bit. Land the test if it passes; if it
# fails, read whether the kernel or the test's expectation is wrong before anything else.
# Copy to devrun/ and run from the repository root with BUILD_COMMIT ("<commit> 1") carried.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
git apply results/2026-11-29-session40/quant-tiny-test.diff && echo "applied" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 120 build-gpu/tests/moe_cuda_tests --gtest_filter='*Fp8*' > $L/tests.log 2>&1
echo "FP8 GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Failure|Expected|Which is' $L/tests.log | head -30 >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
