#!/usr/bin/env bash
# Session 41, call 3 (nvidia-h200-x2, lent from mid-session): session 38's prepared x2 call on
# main 89db6b4, plus one run each for issue 14 (alltoall_dedup) and issue 16 (fp8 on the wire).
# Issue 16: DeepSeek-V3 experts at EP 2, bf16 (roofline on: issue 18's % of dense) against both
# FP8 recipes, alternating. Issue 14/18: Mixtral-8x7B at EP 2, 8192 tokens. Issue 15: DeepSeek-V3
# graph against non-graph digests at EP 2 with grouped_sm90 pinned (the check on the graph run).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
ep2() {  # tag timeout [more]
  local n=$1 tmo=$2; shift 2
  timeout $tmo mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    $B run --backend cuda --set mesh.ep=2 --set dispatch=nvlink --set align=16 --set roofline=false \
    --set expert_grad_dtype=bf16 --timeout-s $((tmo - 10)) "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  (step|dispatch_fwd|experts_fwd|experts_bwd) ' $L/$n.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/$n.log | head -1) $(grep -E '^# (check|throughput|lanes|wire)' $L/$n.log | tr '\n' ' ')" >> $S
  grep -E 'error|FAILED' $L/$n.log | head -3 >> $S
}
STEP="--set check=off --set warmup_s=4 --steps 20 --warmup 5"
for r in 1 2; do
  ep2 ds-bf16-$r 120 --config bench/deepseek_v3 $STEP --set roofline=true
  ep2 ds-fp8t-$r 120 --config bench/deepseek_v3 $STEP --set precision=fp8_tensor --set fp8_weights=cached
  ep2 ds-fp8b-$r 120 --config bench/deepseek_v3 $STEP --set precision=fp8_block --set fp8_weights=cached
done
for r in 1 2; do ep2 mx-bf16-$r 120 --config bench/mixtral_8x7b --set tokens_per_rank=8192 $STEP; done
# Graph against no graph, grouped_sm90 pinned: the check on the graph run, digests compared.
G="--config bench/deepseek_v3 --set gemm.method=grouped_sm90 --steps 3 --warmup 2 --set warmup_s=0"
ep2 ds-graph 240 $G --set graph=true --set check=first
ep2 ds-nograph 100 $G --set graph=false --set check=off
echo "digests equal: $(python3 -c "
import json; a=json.load(open('$L/ds-graph.json'))['digests']; b=json.load(open('$L/ds-nograph.json'))['digests']
print(a == b, {k: (a[k], b[k]) for k in a if a[k] != b[k]})" 2>&1 | tail -1)" >> $S
[ $(el) -lt 480 ] && ep2 ds-dedup 90 --config bench/deepseek_v3 $STEP --set dispatch=alltoall_dedup
[ $(el) -lt 510 ] && ep2 ds-fp8b-wire 90 --config bench/deepseek_v3 $STEP --set precision=fp8_block --set fp8_weights=cached --set dispatch_dtype=fp8
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
