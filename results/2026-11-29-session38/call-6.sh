#!/usr/bin/env bash
# Session 38, call 6 (one H200): moebench gemm's FP8 rows as the step pays them (up and down write
# xe's and a's transposed codes, wgrad_in and wgrad_out take them): Mixtral-8x7B fp8_tensor and
# fp8_block at 8192 tokens, and a 4-step fp8_tensor check of the same build.
set -uo pipefail
START=$(date +%s)
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $OUT/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $OUT/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
for p in fp8_tensor fp8_block; do
  timeout 60 build-gpu/moebench gemm --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set align=16 --set expert_grad_dtype=bf16 --set precision=$p --methods lt_multistream --iters 10 --out $OUT/gemm-$p.json > $OUT/gemm-$p.log 2>&1
  echo "== gemm $p rc=$? at $(el) s" >> $S; grep -E "^# FP8|$p:|dense|weights" $OUT/gemm-$p.log >> $S
done
cat $S
