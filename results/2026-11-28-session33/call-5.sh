#!/usr/bin/env bash
# Session 33, call 5 (one H200): BufferPlanCuda made exact (call 4's two known differences
# computed from their formulas), with the tree's FP8 weights layout; the FP8 GPU tests again.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j16 --target moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 90 build-gpu/tests/moe_cuda_tests --gtest_filter='BufferPlanCuda*:*Fp8*' > $L/tests.log 2>&1
echo "BufferPlanCuda and FP8 tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E "Which is|Failure|Google Test trace" -A1 $L/tests.log | head -40 >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
