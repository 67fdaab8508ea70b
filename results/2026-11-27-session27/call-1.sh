#!/usr/bin/env bash
# Session 27, call 1 (2 GPUs): baseline of the overlap schedules at settled clocks: the three bench
# workloads at EP 2 (nvlink), overlap none against dispatch_bwd, alternating.
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
import json;d=json.load(open('$1'));t=d['timing'];g=d['gemm'];l=t['lanes'];p=t['phases']
print('step', round(t['step']['median'],3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1), 'method', g['method'], 'settle', t['settle_steps'], 'drift', None if t['step_drift'] is None else [round(x,2) for x in t['step_drift']['thirds_ms']], 'a2a', round(l['a2a']['median'],3), 'least', round(l['a2a_least_rank']['median'],3))
print('  phases', {k: round(v['median'],3) for k,v in p.items()})" 2>&1 | tail -3; }
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set roofline=false --timeout-s 120 --set align=16 --set mesh.ep=2 --set dispatch=nvlink --set check=off --steps 20 --warmup 8"
go() {  # name config [more]
  local n=$1 cfg=$2; shift 2
  [ $(el) -gt 540 ] && { echo "skip $n" >> $S; return; }
  timeout 150 $MPI build-gpu/moebench run --config configs/bench/$cfg.json $COMMON "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (warning|lanes)' $L/$n.log >> $S
}
for r in 1 2; do
  go deepseek-none-$r deepseek_v3 --set gemm.method=grouped_sm90 --set overlap=none
  go deepseek-dbwd-$r deepseek_v3 --set gemm.method=grouped_sm90 --set overlap=dispatch_bwd
done
for r in 1 2; do
  go mixtral-none-$r mixtral_8x7b --set gemm.method=lt_multistream --set tokens_per_rank=8192 --set overlap=none
  go mixtral-dbwd-$r mixtral_8x7b --set gemm.method=lt_multistream --set tokens_per_rank=8192 --set overlap=dispatch_bwd
done
go qwen3-none qwen3_30b_a3b --set gemm.method=grouped_sm90 --set graph=true --set overlap=none
go qwen3-dbwd qwen3_30b_a3b --set gemm.method=grouped_sm90 --set graph=true --set overlap=dispatch_bwd
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
