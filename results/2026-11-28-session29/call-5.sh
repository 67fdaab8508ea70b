#!/usr/bin/env bash
# Session 29, call 5 (1 GPU): moebench gemm --rows routed (cf05e6d) against balanced rows on the
# bench workloads, and moebench dispatch (its routing now route_first_step's) at EP 1.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j16 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
timeout 60 mpirun --allow-run-as-root -np 1 $B dispatch --config bench/deepseek_v3 --backend cuda --set align=16 --iters 5 --dispatchers alltoall > $L/dispatch-ds-ep1.log 2>&1
echo "== dispatch deepseek ep1 rc=$? at $(el) s: $(grep -o 'in 128-row tiles.*' $L/dispatch-ds-ep1.log | head -1)" >> $S
gm() {  # name config [more]
  local n=$1 cfg=$2; shift 2
  [ $(el) -gt 330 ] && { echo "skip $n" >> $S; return; }
  timeout 90 $B gemm --config $cfg --methods grouped_sm90 --iters 20 --set align=16 --set expert_grad_dtype=bf16 "$@" --out $L/gemm-$n.json > $L/gemm-$n.log 2>&1
  echo "== gemm $n rc=$? at $(el) s" >> $S
  grep -E '^# [a-z].* at ep|^  [a-z]' $L/gemm-$n.log >> $S
}
gm ds-ep2-bal bench/deepseek_v3 --ep 2
gm ds-ep2-routed bench/deepseek_v3 --ep 2 --rows routed
gm ds-ep2-routed-placed bench/deepseek_v3 --ep 2 --rows routed --set expert_placement=balanced
gm ds-ep2-fp8b-routed bench/deepseek_v3 --ep 2 --rows routed --set precision=fp8_block
gm qw-bal bench/qwen3_30b_a3b
gm qw-routed bench/qwen3_30b_a3b --rows routed
gm mx-bal bench/mixtral_8x7b --set tokens_per_rank=8192 --methods grouped_sm90,lt_multistream
gm mx-routed bench/mixtral_8x7b --set tokens_per_rank=8192 --methods grouped_sm90,lt_multistream --rows routed
gm ds-ep2-bal-r2 bench/deepseek_v3 --ep 2
gm ds-ep2-routed-r2 bench/deepseek_v3 --ep 2 --rows routed
python3 -c "
import json
for n in ['ds-ep2-routed','qw-routed','mx-routed']:
    d=json.load(open('$L/gemm-'+n+'.json')); r=d['rows']
    print(n, d['rows_from'], d['routing_mode'], 'ep_rank', d['ep_rank'], 'rows', min(r), max(r), sum(r)/len(r))
" >> $S 2>&1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
