#!/usr/bin/env bash
# Session 27, call 2 (2 GPUs): expert_placement balanced. GPU tests of the changed kernels and the
# GPU reference; Qwen3-30B-A3B at EP 2 (nvlink, graph) checked with balanced placement; DeepSeek-V3
# and Qwen3-30B-A3B steps, contiguous against balanced, alternating, at settled clocks (the bench
# workloads' warmup_s 5).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j30 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
CUDA_VISIBLE_DEVICES=0 timeout 200 build-gpu/tests/moe_cuda_tests --gtest_filter='DispatchCuda*:*Reference*' > $L/tests.log 2>&1
echo "tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests.log >> $S
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];l=t['lanes'];p=t['phases'];r=d['routing']
print('step', round(t['step']['median'],3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1), 'settle', t['settle_steps'], 'drift', None if t['step_drift'] is None else [round(x,2) for x in t['step_drift']['thirds_ms']], 'a2a', round(l['a2a']['median'],3), 'least', round(l['a2a_least_rank']['median'],3), 'rankload', round(r['rank_load_max_over_mean'],4), 'first', r['first_step_rank_load'])
print('  phases', {k: round(v['median'],3) for k,v in p.items()})
print('  digests', d['digests'])" 2>&1 | tail -3; }
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set roofline=false --timeout-s 300 --set align=16 --set mesh.ep=2 --set dispatch=nvlink"
go() {  # name config [more]
  local n=$1 cfg=$2; shift 2
  [ $(el) -gt 540 ] && { echo "skip $n" >> $S; return; }
  timeout 300 $MPI build-gpu/moebench run --config configs/bench/$cfg.json $COMMON "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (warning|lanes|check|routing)' $L/$n.log >> $S
}
go qwen3-check-bal qwen3_30b_a3b --set gemm.method=grouped_sm90 --set graph=true --set expert_placement=balanced --set check=first --steps 2 --warmup 3 --set warmup_s=0
P="--set check=off --steps 20 --warmup 8"
for r in 1 2; do
  go deepseek-cont-$r deepseek_v3 $P --set gemm.method=grouped_sm90 --set expert_placement=contiguous
  go deepseek-bal-$r deepseek_v3 $P --set gemm.method=grouped_sm90 --set expert_placement=balanced
done
go qwen3-cont qwen3_30b_a3b $P --set gemm.method=grouped_sm90 --set graph=true --set expert_placement=contiguous
go qwen3-bal qwen3_30b_a3b $P --set gemm.method=grouped_sm90 --set graph=true --set expert_placement=balanced
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
