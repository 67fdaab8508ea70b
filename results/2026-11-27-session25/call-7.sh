#!/usr/bin/env bash
# Session 25, call 7 (2 GPUs): issue 14's Mixtral-8x7B target (>= 650 TFLOP/s per GPU at EP 2,
# 8192 tokens a rank, bf16 expert gradients) by configuration: gemm.method lt_multistream (the
# last figure, 635), auto (per-GEMM choice in warm-up) and grouped_sm90, overlap none and
# dispatch_bwd; nvlink; 20 steps after 8 warm-up; the final tree. DeepSeek-V3 with overlap
# dispatch_bwd beside none.
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
print('step', round(d['timing']['step']['median'],3), ' '.join(k+' '+str(round(t[k]['median'],3)) for k in ('experts_fwd','experts_bwd','a2a_dispatch_bwd','a2a_combine_fwd') if k in t), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1))" 2>&1 | tail -1; }
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 90 --steps 20 --warmup 8 --set align=16 --set mesh.ep=2 --set dispatch=nvlink"
go() {  # workload tokens method overlap
  local n=$1-$2-$3-$4-r$r
  [ $(el) -gt 540 ] && { echo "skip $n" >> $S; return; }
  timeout 120 $MPI build-gpu/moebench run --config configs/bench/$1.json $COMMON --set tokens_per_rank=$2 --set gemm.method=$3 --set overlap=$4 --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json) $(grep -E '^# expert GEMMs' $L/$n.log | cut -c1-150)" >> $S
}
for r in 1 2; do
  for m in lt_multistream auto grouped_sm90; do
    for o in none dispatch_bwd; do go mixtral_8x7b 8192 $m $o; done
  done
  for o in none dispatch_bwd; do go deepseek_v3 4096 grouped_sm90 $o; done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
