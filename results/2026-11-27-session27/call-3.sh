#!/usr/bin/env bash
# Session 27, call 3 (4 GPUs): expert_placement balanced at EP 4 and, on GPUs 0-1 of the same
# machine, more alternating rounds at EP 2. Qwen3-30B-A3B checked at EP 4 with balanced placement
# (nvlink, graph); DeepSeek-V3 and Qwen3-30B-A3B steps, contiguous against balanced, alternating,
# at settled clocks (the bench workloads' warmup_s 5).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j60 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];l=t['lanes'];p=t['phases'];r=d['routing']
print('step', round(t['step']['median'],3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1), 'settle', t['settle_steps'], 'drift', None if t['step_drift'] is None else [round(x,2) for x in t['step_drift']['thirds_ms']], 'a2a', round(l['a2a']['median'],3), 'least', round(l['a2a_least_rank']['median'],3), 'rankload', round(r['rank_load_max_over_mean'],4), 'first', r['first_step_rank_load'])
print('  experts_fwd', p['experts_fwd']['median'], 'experts_bwd', p['experts_bwd']['median'])" 2>&1 | tail -3; }
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set roofline=false --timeout-s 300 --set align=16 --set dispatch=nvlink"
go() {  # name np config [more]
  local n=$1 np=$2 cfg=$3; shift 3
  [ $(el) -gt 560 ] && { echo "skip $n" >> $S; return; }
  local dev=0,1,2,3; [ $np -eq 2 ] && dev=0,1
  timeout 300 mpirun --allow-run-as-root -np $np -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY -x CUDA_VISIBLE_DEVICES=$dev \
    build-gpu/moebench run --config configs/bench/$cfg.json $COMMON --set mesh.ep=$np "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (warning|lanes|check|routing)' $L/$n.log >> $S
}
export CUDA_VISIBLE_DEVICES=0,1,2,3
go qwen3-ep4-check-bal 4 qwen3_30b_a3b --set gemm.method=grouped_sm90 --set graph=true --set expert_placement=balanced --set check=first --steps 2 --warmup 3 --set warmup_s=0
P="--set check=off --steps 20 --warmup 8"
for r in 1 2; do
  go deepseek-ep4-cont-$r 4 deepseek_v3 $P --set gemm.method=grouped_sm90 --set expert_placement=contiguous
  go deepseek-ep4-bal-$r 4 deepseek_v3 $P --set gemm.method=grouped_sm90 --set expert_placement=balanced
done
go qwen3-ep4-cont 4 qwen3_30b_a3b $P --set gemm.method=grouped_sm90 --set graph=true --set expert_placement=contiguous
go qwen3-ep4-bal 4 qwen3_30b_a3b $P --set gemm.method=grouped_sm90 --set graph=true --set expert_placement=balanced
for r in 3 4 5; do
  go deepseek-ep2-cont-$r 2 deepseek_v3 $P --set gemm.method=grouped_sm90 --set expert_placement=contiguous
  go deepseek-ep2-bal-$r 2 deepseek_v3 $P --set gemm.method=grouped_sm90 --set expert_placement=balanced
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
