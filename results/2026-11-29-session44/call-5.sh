#!/usr/bin/env bash
# Session 44 call 5 (two H200s): main with the stmatrix epilogue at EP 2 (nvlink, bf16 expert
# gradients, align 16): the check on each bench workload (DeepSeek-V3 and Qwen3-30B-A3B with a
# graph, DeepSeek-V3 with balanced placement), then issue 14's and README's EP 2 figures, two
# rounds: DeepSeek-V3 balanced with a graph, Mixtral-8x7B at 8192 tokens, Qwen3-30B-A3B with a graph.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
find app core kernels comm dispatch tests -type f \( -name "*.cu" -o -name "*.cpp" -o -name "*.h" -o -name "*.cuh" \) -exec touch {} +
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
ep2() {  # tag timeout [more]
  local n=$1 tmo=$2; shift 2
  timeout $tmo mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    $B run --backend cuda --set mesh.ep=2 --set dispatch=nvlink --set align=16 --set roofline=false \
    --set expert_grad_dtype=bf16 --timeout-s $((tmo - 10)) "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd|   a2a_dispatch_fwd) ' $L/$n.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE '[0-9.]+ TFLOP/s per rank' $L/$n.log) $(grep -oE 'SM [0-9]+ MHz' $L/$n.log | head -1) $(grep -E '^# (check|lanes)' $L/$n.log | cut -c1-150 | tr '\n' ' ')" >> $S
  grep -E 'error|FAILED' $L/$n.log | head -3 >> $S
}
CHK="--set check=first --steps 2 --warmup 2 --set warmup_s=0"
ep2 check-ds-graph-bal 150 --config bench/deepseek_v3 --set graph=true --set expert_placement=balanced $CHK
ep2 check-qw-graph 100 --config bench/qwen3_30b_a3b --set graph=true $CHK
ep2 check-mx 100 --config bench/mixtral_8x7b $CHK
STEP="--set check=off --set warmup_s=4 --steps 20 --warmup 5"
for r in 1 2; do
  [ $(el) -gt 420 ] && break
  ep2 ds-graph-bal-$r 60 --config bench/deepseek_v3 $STEP --set gemm.method=grouped_sm90 --set graph=true --set expert_placement=balanced
  ep2 mx-$r 60 --config bench/mixtral_8x7b --set tokens_per_rank=8192 $STEP
  ep2 qw-graph-$r 60 --config bench/qwen3_30b_a3b $STEP --set graph=true
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
