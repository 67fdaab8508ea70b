#!/usr/bin/env bash
# Session 20, call 1 (1 GPU): per-kernel durations (ncu) of one Qwen3-30B-A3B and one DeepSeek-V3
# step at EP 1, and the steps' phase tables, to see where the non-GEMM phases spend their time.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
COMMON="--backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60"
for m in qwen3_30b_a3b deepseek_v3; do
  timeout 120 $B run --config configs/bench/$m.json $COMMON --steps 20 --warmup 8 --out $L/$m-step.json > $L/$m-step.log 2>&1
  echo "== $m step rc=$? at $(el) s" >> $S
  sed -n '/# phase/,/# host/p' $L/$m-step.log >> $S
  timeout 150 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
    $B run --config configs/bench/$m.json $COMMON --steps 1 --warmup 6 --profile > $L/$m-ncu.csv 2> $L/$m-ncu.err
  echo "== $m ncu rc=$? at $(el) s" >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
