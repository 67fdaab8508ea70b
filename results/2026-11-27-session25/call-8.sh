#!/usr/bin/env bash
# Session 25, call 8 (2 GPUs): Mixtral-8x7B at EP 2 (8192 tokens, bf16 expert gradients, nvlink,
# lt_multistream): gemm.algo auto / bucket / exact and gemm.streams 4 / 8, 20 steps after 8
# warm-up, two rounds; the final tree.
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
import json;d=json.load(open('$1'));t=d['timing']['phases']
print('step', round(d['timing']['step']['median'],3), ' '.join(k+' '+str(round(t[k]['median'],3)) for k in ('experts_fwd','experts_bwd') if k in t), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1))" 2>&1 | tail -1; }
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 90 --steps 20 --warmup 8 --set align=16 --set mesh.ep=2 --set dispatch=nvlink --set tokens_per_rank=8192 --set gemm.method=lt_multistream"
go() {  # algo streams
  local n=mixtral-$1-s$2-r$r
  [ $(el) -gt 540 ] && { echo "skip $n" >> $S; return; }
  timeout 120 $MPI build-gpu/moebench run --config configs/bench/mixtral_8x7b.json $COMMON --set gemm.algo=$1 --set gemm.streams=$2 --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json) | $(grep -E '^# expert GEMMs' $L/$n.log | cut -c15-150) | $(grep -E '^# host' $L/$n.log | cut -c1-60)" >> $S
}
for r in 1 2; do
  for a in auto bucket exact; do go $a 4; done
  go bucket 8
  go auto 8
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
