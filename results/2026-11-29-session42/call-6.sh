#!/usr/bin/env bash
# Session 42, call 6 (one H200): issue 16's expert-phase target (FP8 >= 1.6x bf16) against what
# the GEMMs sustain under the 700 W cap: `moebench gemm` with hundreds of calls a GEMM, each in
# bf16 and in the FP8 recipe in the same run (its quantization timed apart), on Mixtral-8x7B at
# 8192 tokens and on DeepSeek-V3's EP 2 shapes (routed rows), both recipes.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
for prec in fp8_tensor fp8_block; do
  [ $(el) -gt 420 ] && break
  timeout 90 $B gemm --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set align=16 --set expert_grad_dtype=bf16 --set precision=$prec --methods lt_multistream,grouped_sm90 --iters 150 --out $L/mx-$prec.json > $L/mx-$prec.log 2>&1
  echo "== mixtral 8192 $prec rc=$? at $(el) s" >> $S; grep -E '^  |^# clocks' $L/mx-$prec.log >> $S
done
for prec in fp8_tensor fp8_block; do
  [ $(el) -gt 480 ] && break
  timeout 90 $B gemm --config bench/deepseek_v3 --ep 2 --rows routed --set align=16 --set expert_grad_dtype=bf16 --set precision=$prec --methods grouped_sm90 --iters 80 --out $L/ds-$prec.json > $L/ds-$prec.log 2>&1
  echo "== deepseek ep2 routed $prec rc=$? at $(el) s" >> $S; grep -E '^  |^# clocks' $L/ds-$prec.log >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
