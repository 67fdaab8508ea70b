#!/usr/bin/env bash
# Session 36, call 6 (one H200, the budget's last minutes): Mixtral-8x7B's expert GEMMs alone in
# bf16 and fp8_tensor (lt_multistream and grouped_sm90): what the FP8 GEMMs and the activations'
# quantization each take, against the dense rates.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
for p in bf16 fp8_tensor; do
  timeout 40 $B gemm --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set align=16 --set expert_grad_dtype=bf16 --set precision=$p --methods lt_multistream,grouped_sm90 --iters 10 --out $L/gemm-$p.json > $L/gemm-$p.log 2>&1
  echo "== gemm $p rc=$? at $(el) s" >> $S
  cat $L/gemm-$p.log >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
