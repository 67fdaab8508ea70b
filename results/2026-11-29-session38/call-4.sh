#!/usr/bin/env bash
# Session 38, call 4 (one H200; run as devrun/call-5.sh): fp8_block's a and dh quantized straight from SwiGLU's inputs
# (never stored) in the tree, against HEAD without it ("old", built beside it): the FP8 GPU tests,
# Mixtral-8x7B (8192 tokens), DeepSeek-V3 (EP 1) and Qwen3-30B-A3B (graph) fp8_block steps in
# alternation, and fp8_block checks (fused; pipelined, which keeps the stored path).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
rm -rf /tmp/old && mkdir /tmp/old && tar --exclude=./build-gpu -cf - . | tar -C /tmp/old -xf -
(cd /tmp/old && git checkout -q -- . && echo "old: $(git status --short | grep -v '^??' | wc -l) changed files") >> $S 2>&1
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j11 --target moebench moe_cuda_tests > $L/build-new.log 2>&1; echo "build new rc=$? at $(el) s" >> $S ) &
( cd /tmp/old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-old.log 2>&1 &&
  cmake --build build-gpu -j5 --target moebench > $L/build-old.log 2>&1; echo "build old rc=$? at $(el) s" >> $S ) &
wait
grep -E " error" $L/build-*.log | head -5 >> $S
timeout 200 build-gpu/tests/moe_cuda_tests --gtest_filter='Fp8SwigluBlockCuda*:ExpertFfnFp8Cuda*:Recipes/Fp8QuantizeCuda*:Fp8SwigluAmaxCuda*:Fp8RowsCuda*:BufferPlanCuda*' > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Which is|Expected|Failure|rror' $L/tests.log | head -20 >> $S
step() {  # tree tag config [more]
  local t=$1 n=$2 c=$3; shift 3
  local B=build-gpu/moebench; [ $t = old ] && B=/tmp/old/build-gpu/moebench
  timeout 100 $B run --backend cuda --config bench/$c --set precision=fp8_block --set fp8_weights=cached --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=4 --set roofline=false --steps 20 --warmup 5 "$@" --out $L/$t-$n.json > $L/$t-$n.log 2>&1
  echo "== $t $n rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/$t-$n.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/$t-$n.log) $(grep -oE 'high-water [0-9.]+ MiB' $L/$t-$n.log)" >> $S
  grep -E 'error' $L/$t-$n.log | head -3 >> $S
}
MX="mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=lt_multistream"
for r in 1 2 3; do step new mx$r $MX; step old mx$r $MX; done
for r in 1 2; do step new ds$r deepseek_v3; step old ds$r deepseek_v3; done
step new qw qwen3_30b_a3b --set graph=true
step old qw qwen3_30b_a3b --set graph=true
check() {  # tag config [more]
  local n=$1 c=$2; shift 2
  timeout 150 build-gpu/moebench run --backend cuda --config bench/$c --set align=16 --set check=first --set check_unquantized=false --set roofline=false --set fp8_weights=cached --set precision=fp8_block --steps 2 --warmup 2 "$@" --out $L/check-$n.json > $L/check-$n.log 2>&1
  echo "== check $n rc=$? at $(el) s: $(grep -E '^# check' $L/check-$n.log)" >> $S
  grep -E 'FAILED|error' $L/check-$n.log | head -4 >> $S
}
check mx-lt mixtral_8x7b --set tokens_per_rank=4096 --set gemm.method=lt_multistream
check mx-pipe mixtral_8x7b --set tokens_per_rank=4096 --set gemm.method=grouped_sm90 --set overlap=pipeline --set overlap_chunks=2
check qw-graph-shared qwen3_30b_a3b --set graph=true --set model.shared_experts=2 --set model.shared_ffn=768
check qw-dispatch-fp8 qwen3_30b_a3b --set dispatch_dtype=fp8 --set gemm.method=lt_multistream
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
