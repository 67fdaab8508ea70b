#!/usr/bin/env bash
# Session 26, call 8 (2 GPUs): under the power cap, do 2-CTA clusters (TMA multicast: half the
# weights' L2 reads) buy clocks? grouped_sm90 with gemm.sm90_cluster 1 and 2 against lt_multistream,
# bf16, the bench workloads' warmup_s 5, 20 timed steps, nvlink, bf16 expert gradients.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j30 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];p=t['phases']
print('step', round(t['step']['median'],3), 'experts_fwd', round(p['experts_fwd']['median'],3), 'experts_bwd', round(p['experts_bwd']['median'],3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1), 'settle', t['settle_steps'], 'drift', None if t['step_drift'] is None else [round(x,2) for x in t['step_drift']['thirds_ms']])" 2>&1 | tail -1; }
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 90 --steps 20 --warmup 3 --set align=16 --set mesh.ep=2 --set dispatch=nvlink"
for spec in "mixtral_8x7b 8192 grouped_sm90 1" "mixtral_8x7b 8192 grouped_sm90 2" "mixtral_8x7b 8192 lt_multistream 1" "deepseek_v3 4096 grouped_sm90 1" "deepseek_v3 4096 grouped_sm90 2"; do
  set -- $spec
  n=$1-$3-c$4
  [ $(el) -gt 450 ] && { echo "skip $n" >> $S; continue; }
  P="--set gemm.sm90_cluster=$4"
  nvidia-smi --query-gpu=index,clocks.sm --format=csv,noheader -lms 500 > $L/$n-smi.csv 2>&1 &
  SMI=$!
  timeout 120 $MPI build-gpu/moebench run --config configs/bench/$1.json $COMMON --set tokens_per_rank=$2 --set gemm.method=$3 $P --out $L/$n.json > $L/$n.log 2>&1
  rc=$?; kill $SMI
  echo "== $n rc=$rc at $(el) s: $(row $L/$n.json)" >> $S
  echo "  SM MHz gpu0: $(awk -F, '$1==0 {printf "%d ", $2}' $L/$n-smi.csv)" >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
