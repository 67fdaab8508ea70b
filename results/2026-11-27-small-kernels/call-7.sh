#!/usr/bin/env bash
# Session 20, call 7 (1 GPU): where DeepSeek-V3's FP8 step spends its time: the phase tables of
# bf16, fp8_tensor and fp8_block at EP 1, and per-kernel durations (ncu) of one fp8_block and one
# fp8_tensor step.
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
for pr in bf16 fp8_tensor fp8_block; do
  n=deepseek_v3-$pr
  timeout 120 $B run --config configs/bench/deepseek_v3.json $COMMON --set precision=$pr --steps 10 --warmup 8 --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s" >> $S
  grep -E "expert GEMMs:" $L/$n.log | head -1 | cut -c1-300 >> $S
  sed -n '/# phase/,/  step/p' $L/$n.log | grep -E "phase|router|layout|dispatch_fwd|experts|combine|shared|step" >> $S
done
for pr in fp8_block fp8_tensor; do
  [ $(el) -gt 400 ] && continue
  timeout 150 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
    $B run --config configs/bench/deepseek_v3.json $COMMON --set precision=$pr --set gemm.method=grouped_sm90 --steps 1 --warmup 3 --profile > $L/ncu-$pr.csv 2> $L/ncu-$pr.err
  echo "== ncu $pr rc=$? at $(el) s" >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
