#!/usr/bin/env bash
# Prepared for the next session's first GPU call (one H200 is enough; not run): the review's
# review-one-algo-choice.diff (one choice key and one map for every gemm.algo policy, in place of
# the bucket, tuned and FP8 stride-free maps; kept_codes_at for the kept codes' layout) applied,
# its GPU tests, the Mixtral-8x7B fp8_tensor step's plan counts under auto and tuned (auto should
# still show 18 heuristic queries in 20 timed steps, tuned 0), a check, and `moebench gemm`.
# Copy to devrun/, run from the repository root with BUILD_COMMIT ("<commit> 1") carried.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests --gtest_filter='GemmCuda*:ExpertFfnCuda*:ExpertFfnFp8Cuda*:BufferPlanCuda*' > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Which is|Expected|Failure' $L/tests.log | head -20 >> $S
B=build-gpu/moebench
for a in auto tuned; do
  timeout 90 $B run --backend cuda --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=lt_multistream --set precision=fp8_tensor --set fp8_weights=cached --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=4 --set roofline=false --set gemm.algo=$a --steps 20 --warmup 5 --out $L/step-$a.json > $L/step-$a.log 2>&1
  echo "== step $a rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/step-$a.log | awk '{print $1, $2}' | tr '\n' ' ')" >> $S
  grep -E 'heuristic queries' $L/step-$a.log | sed 's/.*; \([0-9]* plans\)/  \1/' >> $S
done
timeout 120 $B run --backend cuda --config bench/mixtral_8x7b --set tokens_per_rank=4096 --set gemm.method=lt_multistream --set precision=fp8_tensor --set fp8_weights=cached --set align=16 --set check=first --set check_unquantized=false --set roofline=false --steps 2 --warmup 2 --out $L/check.json > $L/check.log 2>&1
echo "== check rc=$? at $(el) s: $(grep -E '^# check' $L/check.log)" >> $S
timeout 60 $B gemm --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods lt_multistream --iters 10 --out $L/gemm.json > $L/gemm.log 2>&1
echo "== gemm rc=$? at $(el) s" >> $S; grep -E "fp8_tensor:|dense" $L/gemm.log >> $S
timeout 150 python3 devrun/overlap_probe.py > $L/probe.log 2>&1
echo "== probe rc=$? at $(el) s" >> $S; cat $L/probe.log | tail -8 >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
