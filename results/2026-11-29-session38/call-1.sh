#!/usr/bin/env bash
# Session 38, call 1: session 37's results/2026-11-28-session37/next-call.sh as it ran (devrun/call-1.sh).
# Prepared for the next session's first GPU call (one H200 is enough): this session's three
# prepared diffs applied to the tree, their GPU tests, then `moebench gemm` and the Mixtral-8x7B
# fp8_tensor step with the quantization ring and without it (reverted, rebuilt) in the same
# call. Run from the repository root with a BUILD_COMMIT file ("<commit> 1") carried; copy to
# devrun/ first (results/ is read-only history).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
R=results/2026-11-28-session37
for d in fp8-quantize-ring gemm-plans-one-bucket-key gemm-bench-gemm-keys; do
  git apply $R/$d.diff 2>> $S && echo "applied $d" >> $S || echo "FAILED to apply $d" >> $S
done
touch kernels/cuda/fp8_quantize.cu kernels/cuda/gemm_cublaslt.cu kernels/cuda/gemm_cublaslt.h \
  kernels/cuda/gemm_bench.cu kernels/cuda/gemm_bench.h kernels/cuda/cuda_ops.cu app/gemm_command.cpp \
  tests/cuda/test_gemm_cuda.cu  # a warm machine's objects may be newer than the carried sources
build() {  # tag targets...
  local tag=$1; shift
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" --target "$@" > $L/build-$tag.log 2>&1
  echo "build $tag rc=$? at $(el) s" >> $S
  grep -E "error" $L/build-$tag.log | head -5 >> $S
}
B=build-gpu/moebench
build all moebench moe_cuda_tests
timeout 150 build-gpu/tests/moe_cuda_tests --gtest_filter='Recipes/Fp8QuantizeCuda*:Fp8RowsCuda*:Fp8SwigluAmaxCuda*:ExpertFfnFp8Cuda*:*GroupedGemmFp8*:GemmCuda*' > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Which is|Expected|Failure' $L/tests.log | head -20 >> $S
gemm() {  # tag [more]
  local n=$1; shift
  timeout 60 $B gemm --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods lt_multistream --iters 10 "$@" --out $L/gemm-$n.json > $L/gemm-$n.log 2>&1
  echo "== gemm $n rc=$? at $(el) s" >> $S; grep -E "^# mixtral|fp8_tensor:|dense" $L/gemm-$n.log >> $S
}
step() {  # tag [more]
  local n=$1; shift
  timeout 90 $B run --backend cuda --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=lt_multistream --set precision=fp8_tensor --set fp8_weights=cached --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=5 --set roofline=false --steps 20 --warmup 5 "$@" --out $L/step-$n.json > $L/step-$n.log 2>&1
  echo "== step $n rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/step-$n.log | awk '{print $1, $2}' | tr '\n' ' ')" >> $S
  grep -E 'heuristic queries' $L/step-$n.log | sed 's/.*; \([0-9]* plans\)/  \1/' >> $S
}
gemm ring
gemm ring-tuned --set gemm.algo=tuned
step ring-1
timeout 120 $B run --backend cuda --config bench/mixtral_8x7b --set tokens_per_rank=4096 --set gemm.method=lt_multistream --set precision=fp8_tensor --set fp8_weights=cached --set align=16 --set check=first --set check_unquantized=false --set roofline=false --steps 2 --warmup 2 --out $L/check-ring.json > $L/check-ring.log 2>&1
echo "== check ring rc=$? at $(el) s: $(grep -E '^# check' $L/check-ring.log)" >> $S
git apply -R $R/fp8-quantize-ring.diff 2>> $S && touch kernels/cuda/fp8_quantize.cu
build main moebench
gemm main
step main-1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
