#!/usr/bin/env bash
# Session 26, call 5 (2 GPUs, the machine of call 4): the graph replayed in warmup_s steps, checked; Mixtral-8x7B after 8 s.
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
go qwen3-graph-check-s5 qwen3_30b_a3b grouped_sm90 --set check=first --steps 2 --warmup 3 --set graph=true --set warmup_s=5
go mixtral-lt-s8 mixtral_8x7b lt_multistream --set check=off --steps 40 --warmup 8 --set warmup_s=8 --set tokens_per_rank=8192
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
