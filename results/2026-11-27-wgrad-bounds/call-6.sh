#!/usr/bin/env bash
# Session 21, call 6 (1 GPU): what the bench workloads' skewed learned routing costs the expert
# phases, against routing.mode balanced (every expert the same rows, as `moebench gemm` times
# them), same build, alternating; EP 1, bf16 expert gradients.
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
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60 --steps 20 --warmup 8"
row() { python3 -c "
import json; d=json.load(open('$1')); t=d['timing']['phases']; r=d['routing']['rows_per_expert']
print(round(d['timing']['step']['median'],3), 'experts_fwd', round(t['experts_fwd']['median'],3), round(t['experts_fwd']['tflops_per_rank']), 'experts_bwd', round(t['experts_bwd']['median'],3), round(t['experts_bwd']['tflops_per_rank']), '| rows/expert min %.0f median %.0f p90 %.0f max %.0f' % (r['min'], r['median'], r['p90'], r['max']))" 2>&1 | tail -1; }
for round in 1 2; do
  for w in qwen3_30b_a3b deepseek_v3; do
    for mode in learned balanced; do
      [ $(el) -gt 400 ] && continue
      n=$w-$mode-r$round
      timeout 100 $B run --config configs/bench/$w.json $COMMON --set routing.mode=$mode --set gemm.method=grouped_sm90 --out $L/$n.json > $L/$n.log 2>&1
      echo "== $n rc=$? at $(el) s: step $(row $L/$n.json)" >> $S
    done
  done
done
for w in qwen3_30b_a3b deepseek_v3; do
  timeout 100 $B gemm --config configs/bench/$w.json --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 20 > $L/gemm-$w.txt 2>&1
  echo "== gemm $w rc=$? at $(el) s" >> $S
  grep -E "^  (up|down|dgrad|wgrad|dense)" $L/gemm-$w.txt >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
