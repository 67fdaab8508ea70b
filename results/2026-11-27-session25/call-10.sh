#!/usr/bin/env bash
# Session 25, call 10 (2 GPUs): gemm.method auto with the choice's own warm-up (99a1c50) against
# lt_multistream fixed, Mixtral-8x7B at EP 2 (8192 tokens, nvlink, bf16 gradients, 20 steps after
# 8 warm-up), two rounds.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j30 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];g=d['gemm']
print('step', round(t['step']['median'],3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1), 'method', g['method'], 'added', g['added_warmup_steps'], 'queries timed', g['heuristic_queries_timed'], 'first steps', [round(x,1) for x in t['samples_ms']['step'][:5]])" 2>&1 | tail -1; }
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 90 --steps 20 --warmup 8 --set align=16 --set mesh.ep=2 --set dispatch=nvlink --set tokens_per_rank=8192"
for r in 1 2; do
  for m in auto lt_multistream; do
    n=mixtral-$m-r$r
    [ $(el) -gt 300 ] && { echo "skip $n" >> $S; continue; }
    timeout 120 $MPI build-gpu/moebench run --config configs/bench/mixtral_8x7b.json $COMMON --set gemm.method=$m --out $L/$n.json > $L/$n.log 2>&1
    echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
    grep -E '^# expert GEMMs' $L/$n.log | cut -c1-260 >> $S
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
