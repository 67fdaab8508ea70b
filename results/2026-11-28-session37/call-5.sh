#!/usr/bin/env bash
# Session 37, call 5 (one H200): the quantization kernel loading each tile's per-tensor scale with
# the tile's values (V1), and `moebench gemm`'s FP8 dense row: the FP8 quantization and grouped
# FP8 tests; `moebench gemm` Mixtral-8x7B fp8_tensor and a 20-step fp8_tensor step, each with V1
# and without (the same tree less devrun/v1.diff, rebuilt), in this call.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
build() {  # tag targets...
  local tag=$1; shift
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" --target "$@" > $L/build-$tag.log 2>&1
  echo "build $tag rc=$? at $(el) s" >> $S
  grep -E "error" $L/build-$tag.log | head -5 >> $S
}
B=build-gpu/moebench
build v1 moebench moe_cuda_tests
timeout 150 build-gpu/tests/moe_cuda_tests --gtest_filter='Recipes/Fp8QuantizeCuda*:Fp8RowsCuda*:Fp8SwigluAmaxCuda*:ExpertFfnFp8Cuda*:*GroupedGemmFp8*' > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Which is|Expected' $L/tests.log | head -20 >> $S
gemm() {  # tag
  timeout 60 $B gemm --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods lt_multistream --iters 10 --out $L/gemm-$1.json > $L/gemm-$1.log 2>&1
  echo "== gemm $1 rc=$? at $(el) s" >> $S; grep -E "^#  *gemm|FP8 rows|lt_multistream|dense" $L/gemm-$1.log >> $S
}
step() {  # tag
  timeout 90 $B run --backend cuda --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=lt_multistream --set precision=fp8_tensor --set fp8_weights=cached --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=5 --steps 20 --warmup 5 --out $L/step-$1.json > $L/step-$1.log 2>&1
  echo "== step $1 rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/step-$1.log | awk '{print $1, $2}' | tr '\n' ' ')" >> $S
  grep -E '^# roofline' $L/step-$1.log >> $S
}
gemm v1
step v1
git apply -R devrun/v1.diff 2>>$S || patch -R -p1 < devrun/v1.diff >> $S 2>&1
build main moebench
gemm main
step main
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
