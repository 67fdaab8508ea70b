#!/usr/bin/env bash
# Session 29, call 1 (2 GPUs): session 28's last commits, never run on a GPU: all GPU tests
# (NvmlClocksCuda among them), moebench gemm and dispatch at DeepSeek-V3 EP 2 (clocks, tile figure),
# and DeepSeek-V3 steps at EP 2 with grouped_sm90 (the run's # clocks: and # tiles: lines).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j30 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
export CUDA_VISIBLE_DEVICES=0
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests.log | head >> $S
for p in bf16 fp8_block; do
  timeout 60 $B gemm --config configs/bench/deepseek_v3.json --ep 2 --methods grouped_sm90 --iters 20 --set expert_grad_dtype=bf16 --set precision=$p --out $L/gemm-deepseek-ep2-$p.json > $L/gemm-deepseek-ep2-$p.log 2>&1
  echo "== gemm deepseek ep2 $p rc=$? at $(el) s" >> $S
  grep -E '^  [a-z]|^# clocks' $L/gemm-deepseek-ep2-$p.log >> $S
done
unset CUDA_VISIBLE_DEVICES
M="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
timeout 90 $M $B dispatch --config configs/bench/deepseek_v3.json --backend cuda --set mesh.ep=2 --set align=16 --dispatchers nvlink,alltoall --iters 20 --out $L/dispatch-deepseek-ep2.json > $L/dispatch-deepseek-ep2.log 2>&1
echo "== dispatch deepseek ep2 rc=$? at $(el) s" >> $S
grep -iE 'tile|^ *(nvlink|alltoall)' $L/dispatch-deepseek-ep2.log | head -20 >> $S
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];p=t['phases']
print('step', round(t['step']['median'],3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1), 'experts', round(p['experts_fwd']['median'],3), round(p['experts_bwd']['median'],3), 'tile_rows', d['routing'].get('tile_rows'))" 2>&1 | tail -1; }
go() {  # name [more]
  local n=$1; shift
  [ $(el) -gt 420 ] && { echo "skip $n" >> $S; return; }
  timeout 150 $M $B run --config configs/bench/deepseek_v3.json --backend cuda --set expert_grad_dtype=bf16 --set roofline=false \
    --set align=16 --set mesh.ep=2 --set dispatch=nvlink --set gemm.method=grouped_sm90 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (clocks|tiles|check|warning|lanes)' $L/$n.log >> $S
}
go deepseek-ep2-check --set check=first --steps 2 --warmup 3 --set warmup_s=0
go deepseek-ep2 --set check=off --steps 20 --warmup 8
go deepseek-ep2-fp8b --set check=off --steps 20 --warmup 8 --set precision=fp8_block
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
