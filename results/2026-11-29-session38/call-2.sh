#!/usr/bin/env bash
# Session 38, call 2 (one H200): the tree (session 37's plan diffs landed in it with the GEMM test
# fixes; FP8 forward keeps xe's transposed codes; chunked steps keep none) against "old" (main +
# the two plan diffs only): GPU tests, Mixtral-8x7B fp8 steps A/B in alternation, checks, and the
# memory of a pipelined FP8 step with learned routing on both.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
R=results/2026-11-28-session37
rm -rf /tmp/old && mkdir /tmp/old && tar --exclude=./build-gpu -cf - . | tar -C /tmp/old -xf -
(cd /tmp/old && git checkout -q -- . && git apply $R/gemm-plans-one-bucket-key.diff $R/gemm-bench-gemm-keys.diff && echo "old: $(git diff --stat | tail -1)") >> $S 2>&1
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j12 --target moebench moe_cuda_tests > $L/build-new.log 2>&1; echo "build new rc=$? at $(el) s" >> $S ) &
( cd /tmp/old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-old.log 2>&1 &&
  cmake --build build-gpu -j6 --target moebench > $L/build-old.log 2>&1; echo "build old rc=$? at $(el) s" >> $S ) &
wait
grep -E "error" $L/build-*.log | head -5 >> $S
timeout 200 build-gpu/tests/moe_cuda_tests --gtest_filter='GemmCuda*:ExpertFfnFp8Cuda*:BufferPlanCuda*:Recipes/Fp8QuantizeCuda*:Fp8RowsCuda*:Fp8SwigluAmaxCuda*:*GroupedGemmSm90Fp8*:DispatchCudaMergedChunks*' > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Which is|Expected|Failure|rror' $L/tests.log | head -20 >> $S
step() {  # tree tag [more]
  local t=$1 n=$2; shift 2
  local B=build-gpu/moebench; [ $t = old ] && B=/tmp/old/build-gpu/moebench
  timeout 90 $B run --backend cuda --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=lt_multistream --set fp8_weights=cached --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=5 --set roofline=false --steps 20 --warmup 5 "$@" --out $L/$t-$n.json > $L/$t-$n.log 2>&1
  echo "== $t $n rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/$t-$n.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'high-water [0-9.]+ MiB' $L/$t-$n.log) $(grep -oE 'SM [0-9]+ MHz' $L/$t-$n.log)" >> $S
  grep -E 'heuristic queries' $L/$t-$n.log | sed 's/.*; \([0-9]* plans\)/  \1/' >> $S
  grep -E 'error' $L/$t-$n.log | head -3 >> $S
}
for r in 1 2 3; do
  step new t$r --set precision=fp8_tensor
  step old t$r --set precision=fp8_tensor
done
for r in 1 2; do
  step new b$r --set precision=fp8_block
  step old b$r --set precision=fp8_block
done
step new pipe --set precision=fp8_tensor --set overlap=pipeline --set overlap_chunks=2
step old pipe --set precision=fp8_tensor --set overlap=pipeline --set overlap_chunks=2
check() {  # tag config [more]
  local n=$1 c=$2; shift 2
  timeout 150 build-gpu/moebench run --backend cuda --config bench/$c --set align=16 --set check=first --set check_unquantized=false --set roofline=false --set fp8_weights=cached --steps 2 --warmup 2 "$@" --out $L/check-$n.json > $L/check-$n.log 2>&1
  echo "== check $n rc=$? at $(el) s: $(grep -E '^# check' $L/check-$n.log) $(grep -oE 'high-water [0-9.]+ MiB' $L/check-$n.log)" >> $S
  grep -E 'FAILED|error' $L/check-$n.log | head -4 >> $S
}
check mx-t mixtral_8x7b --set tokens_per_rank=4096 --set gemm.method=lt_multistream --set precision=fp8_tensor
check mx-b-sm90 mixtral_8x7b --set tokens_per_rank=4096 --set gemm.method=grouped_sm90 --set precision=fp8_block
check mx-t-pipe mixtral_8x7b --set tokens_per_rank=4096 --set gemm.method=lt_multistream --set precision=fp8_tensor --set overlap=pipeline --set overlap_chunks=2
check qw-t-graph-shared qwen3_30b_a3b --set gemm.method=grouped_sm90 --set precision=fp8_tensor --set graph=true --set model.shared_experts=1 --set model.shared_ffn=768
check qw-b-shared qwen3_30b_a3b --set gemm.method=lt_multistream --set precision=fp8_block --set model.shared_experts=2 --set model.shared_ffn=768
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
