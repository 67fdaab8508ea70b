#!/usr/bin/env bash
# Session 22, call 5 (1 GPU): the GPU reference's FP8 path (the host's quantization around fp32
# GEMMs). GPU tests (the new ReferenceCuda.Fp8StepMatchesCpuMath prints each case's distance to
# the float64 math); then the bench workloads at EP 1 checked in FP8 by the GPU reference, both
# recipes, the check's time and verdict.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 120 build-gpu/tests/moe_cuda_tests --gtest_filter='ReferenceCuda*' > $L/tests_reference.log 2>&1
echo "ReferenceCuda rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_reference.log | tr '\n' ' ')" >> $S
grep -E '^  (tensor|block)|Failure|Expected|Which is|FAILED' $L/tests_reference.log | head -30 >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests_all.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_all.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests_all.log | head >> $S
CHK="--backend cuda --set check=first --steps 1 --warmup 1 --set roofline=false --timeout-s 120 --set align=16 --set fp8_weights=cached"
for spec in "qwen3_30b_a3b fp8_block grouped_sm90" "qwen3_30b_a3b fp8_tensor grouped_sm90" "mixtral_8x7b fp8_tensor lt_multistream" "mixtral_8x7b fp8_block lt_multistream" "deepseek_v3 fp8_block grouped_sm90"; do
  set -- $spec
  left=$(( 570 - $(el) ))
  [ $left -lt 60 ] && { echo "== $1 $2 skipped: $left s left" >> $S; continue; }
  n=check-$1-$2
  /usr/bin/time -v timeout $left build-gpu/moebench run --config configs/bench/$1.json $CHK --set precision=$2 --set gemm.method=$3 --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# check:|^# correctness|Maximum resident' $L/$n.log | tr '\n' ' ')" >> $S
  grep -E '^  (out|dx|dw_in|dw_out|dw_sh_in) ' $L/$n.log >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
