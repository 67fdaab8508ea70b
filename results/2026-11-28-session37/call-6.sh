#!/usr/bin/env bash
# Session 37, call 6 (one H200): gemm.algo tuned. The GEMM GPU tests (TunedPolicyTimesOncePerBucket
# among them), then Mixtral-8x7B at 8192 tokens on cuBLASLt (lt_multistream), bf16 and
# fp8_tensor, gemm.algo auto against tuned in alternation, two rounds; a tuned check.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
grep -E "error" $L/build.log | head -5 >> $S
timeout 120 build-gpu/tests/moe_cuda_tests --gtest_filter='GemmCuda*:ExpertFfnCuda*:ExpertFfnFp8Cuda.MatchesCpuTwin' > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Which is|Expected|Failure' $L/tests.log | head -20 >> $S
B=build-gpu/moebench
step() {  # tag [more]
  local n=$1; shift
  timeout 90 $B run --backend cuda --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=lt_multistream --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=5 --set roofline=false --steps 20 --warmup 5 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/$n.log | awk '{print $1, $2}' | tr '\n' ' ')" >> $S
  grep -E 'heuristic queries' $L/$n.log | sed 's/.*; \([0-9]* plans\)/  \1/' >> $S
  grep -E 'error' $L/$n.log | head -3 >> $S
}
FP8="--set precision=fp8_tensor --set fp8_weights=cached"
for r in 1 2; do
  step bf16-auto-$r --set gemm.algo=auto
  step bf16-tuned-$r --set gemm.algo=tuned
  step fp8-auto-$r --set gemm.algo=auto $FP8
  step fp8-tuned-$r --set gemm.algo=tuned $FP8
done
timeout 120 $B run --backend cuda --config bench/mixtral_8x7b --set tokens_per_rank=4096 --set gemm.method=lt_multistream --set gemm.algo=tuned --set align=16 --set check=first --set roofline=false --steps 2 --warmup 2 --out $L/check-tuned.json > $L/check-tuned.log 2>&1
echo "== check tuned bf16 rc=$? at $(el) s: $(grep -E '^# check' $L/check-tuned.log)" >> $S
timeout 120 $B run --backend cuda --config bench/mixtral_8x7b --set tokens_per_rank=4096 --set gemm.method=lt_multistream --set gemm.algo=tuned --set align=16 --set check=first --set roofline=false --set check_unquantized=false --steps 2 --warmup 2 $FP8 --out $L/check-tuned-fp8.json > $L/check-tuned-fp8.log 2>&1
echo "== check tuned fp8 rc=$? at $(el) s: $(grep -E '^# check' $L/check-tuned-fp8.log)" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
