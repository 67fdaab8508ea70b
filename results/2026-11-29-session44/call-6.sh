#!/usr/bin/env bash
# Session 44 call 6 (one H200, the session's last device seconds): issue 16's ratio at EP 1 on
# main with the stmatrix epilogue (FP8's GEMMs store bf16 through it too): DeepSeek-V3 bench
# workload, graph, grouped_sm90, bf16 gradients, align 16, cached FP8 weights; bf16, fp8_tensor,
# fp8_block, one round (20 steps after 4 s).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
find app core kernels comm dispatch tests -type f \( -name "*.cu" -o -name "*.cpp" -o -name "*.h" -o -name "*.cuh" \) -exec touch {} +
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j$(nproc) --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
for pr in bf16 fp8_tensor fp8_block; do
  timeout 40 build-gpu/moebench run --backend cuda --config bench/deepseek_v3 --set precision=$pr --set fp8_weights=cached --set gemm.method=grouped_sm90 --set graph=true --set expert_grad_dtype=bf16 --set align=16 --set check=off --set roofline=false --set warmup_s=4 --steps 20 --warmup 5 --out $L/ds-$pr.json > $L/ds-$pr.log 2>&1
  echo "== ds $pr rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/ds-$pr.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE '[0-9.]+ TFLOP/s per rank' $L/ds-$pr.log) $(grep -oE 'SM [0-9]+ MHz' $L/ds-$pr.log | head -1)" >> $S
  grep -iE 'error' $L/ds-$pr.log | head -2 >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
