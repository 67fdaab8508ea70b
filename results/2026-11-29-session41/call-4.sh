#!/usr/bin/env bash
# Session 41, call 4 (nvidia-h200-x2, warm after call 3, its build reused): call 3's graph run
# (3 steps, no power cap yet) gave DeepSeek-V3 EP 2 22.39 ms against 24.14 without, both at
# 1980 MHz. The same in steady state: bf16 graph (grouped_sm90) against call 3's bf16 default,
# alternating, 20 steps after warmup_s 4; fp8_tensor with a graph; Qwen3-30B-A3B at EP 2 with
# and without a graph (issue 15).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
ep2() {  # tag timeout [more]
  local n=$1 tmo=$2; shift 2
  timeout $tmo mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    $B run --backend cuda --set mesh.ep=2 --set dispatch=nvlink --set align=16 --set roofline=false \
    --set expert_grad_dtype=bf16 --timeout-s $((tmo - 10)) "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/$n.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/$n.log | head -1) $(grep -E '^# (throughput|lanes|host)' $L/$n.log | tr '\n' ' ')" >> $S
  grep -E 'error|FAILED' $L/$n.log | head -3 >> $S
}
STEP="--set check=off --set warmup_s=4 --steps 20 --warmup 5"
for r in 1 2; do
  ep2 ds-graph-$r 120 --config bench/deepseek_v3 $STEP --set gemm.method=grouped_sm90 --set graph=true
  ep2 ds-bf16-$r 120 --config bench/deepseek_v3 $STEP
done
ep2 ds-fp8t-graph 120 --config bench/deepseek_v3 $STEP --set gemm.method=grouped_sm90 --set graph=true --set precision=fp8_tensor --set fp8_weights=cached
ep2 ds-fp8t 120 --config bench/deepseek_v3 $STEP --set precision=fp8_tensor --set fp8_weights=cached
for r in 1 2; do
  ep2 qw-graph-$r 90 --config bench/qwen3_30b_a3b $STEP --set gemm.method=grouped_sm90 --set graph=true
  ep2 qw-$r 90 --config bench/qwen3_30b_a3b $STEP
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
