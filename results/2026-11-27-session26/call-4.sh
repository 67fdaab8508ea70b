#!/usr/bin/env bash
# Session 26, call 4 (2 GPUs): warmup_s as committed (c5f9e08) on the GPU: steady-state steps of
# the three bench workloads at EP 2 (nvlink) after 3 s, lt_multistream / auto / grouped_sm90 on
# Mixtral-8x7B; and Qwen3-30B-A3B with graph true checked with and without warmup_s (the graph
# replayed in the added steps; digests must be equal).
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
import json;d=json.load(open('$1'));t=d['timing'];g=d['gemm'];l=t['lanes']
print('step', round(t['step']['median'],3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1), 'method', g['method'], 'untimed', t['warmup_steps'] + g['added_warmup_steps'], '+ settle', t['settle_steps'], 'drift', None if t['step_drift'] is None else [round(x,2) for x in t['step_drift']['thirds_ms']], 'a2a', round(l['a2a']['median'],3), 'least', round(l['a2a_least_rank']['median'],3))
print('  steps', [round(x,1) for x in t['samples_ms']['step']])
print('  digests', d['digests'])" 2>&1 | tail -3; }
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set roofline=false --timeout-s 120 --set align=16 --set mesh.ep=2 --set dispatch=nvlink"
go() {  # name config method [more]
  local n=$1 cfg=$2 m=$3; shift 3
  [ $(el) -gt 480 ] && { echo "skip $n" >> $S; return; }
  nvidia-smi --query-gpu=index,clocks.sm --format=csv,noheader -lms 200 > $L/$n-smi.csv 2>&1 &
  local smi=$!
  timeout 150 $MPI build-gpu/moebench run --config configs/bench/$cfg.json $COMMON --set gemm.method=$m "$@" --out $L/$n.json > $L/$n.log 2>&1
  local rc=$?; kill $smi
  echo "== $n rc=$rc at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (warning|lanes|mesh|check)' $L/$n.log >> $S
  echo "  SM MHz gpu0 over the run: $(awk -F, '$1==0 {printf "%d ", $2}' $L/$n-smi.csv)" >> $S
}
SS="--set check=off --steps 20 --warmup 8 --set warmup_s=3"
go mixtral-lt-s3 mixtral_8x7b lt_multistream $SS --set tokens_per_rank=8192
go mixtral-auto-s3 mixtral_8x7b auto $SS --set tokens_per_rank=8192
go mixtral-sm90-s3 mixtral_8x7b grouped_sm90 $SS --set tokens_per_rank=8192
go deepseek-s3 deepseek_v3 grouped_sm90 $SS
go qwen3-s3 qwen3_30b_a3b grouped_sm90 $SS --set graph=true
go qwen3-graph-check qwen3_30b_a3b grouped_sm90 --set check=first --steps 2 --warmup 3 --set graph=true
go qwen3-graph-check-s1 qwen3_30b_a3b grouped_sm90 --set check=first --steps 2 --warmup 3 --set graph=true --set warmup_s=1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
