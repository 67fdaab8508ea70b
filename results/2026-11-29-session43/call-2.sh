#!/usr/bin/env bash
# Prepared in session 41, revised in session 42, for the next session that `status` lends
# nvidia-h200-x2 (not run). Issue 14's exposed communication on DeepSeek-V3 at EP 2: session
# 41's call 4 measured the all-to-alls at 9.1-10.2% of the step
# with a graph (target <= 10%), 70-78% of them waiting for the slower rank. The same with
# `expert_placement: balanced` (rows per rank evened), graph and no graph, alternating with
# contiguous; the `# ranks:` line (landed in session 42, 90bebfe, run then on one rank only)
# says which phases differ between the ranks, its first multi-rank GPU run. Mixtral-8x7B at EP 2
# with balanced placement too. Copy to devrun/ and run from the repository root with BUILD_COMMIT
# ("<full 40-digit commit> 1": moebench refuses a short one) carried.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
find app core kernels comm tests -type f \( -name "*.cu" -o -name "*.cpp" -o -name "*.h" -o -name "*.cuh" \) -exec touch {} +; cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
ep2() {  # tag timeout [more]
  local n=$1 tmo=$2; shift 2
  timeout $tmo mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    $B run --backend cuda --set mesh.ep=2 --set dispatch=nvlink --set align=16 --set roofline=false \
    --set expert_grad_dtype=bf16 --timeout-s $((tmo - 10)) "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/$n.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/$n.log | head -1) $(grep -E '^# (lanes|ranks|throughput)' $L/$n.log | tr '\n' ' ') rank_spread in every phase: $(python3 -c "import json; p=json.load(open('$L/$n.json'))['timing']['phases']; print(all('rank_spread' in v for v in p.values()))" 2>&1)" >> $S
  grep -E 'error|FAILED' $L/$n.log | head -3 >> $S
}
STEP="--set check=off --set warmup_s=4 --steps 20 --warmup 5"
G="--set gemm.method=grouped_sm90 --set graph=true"
for r in 1 2; do
  ep2 ds-graph-bal-$r 120 --config bench/deepseek_v3 $STEP $G --set expert_placement=balanced
  ep2 ds-graph-con-$r 120 --config bench/deepseek_v3 $STEP $G
  ep2 ds-bal-$r 120 --config bench/deepseek_v3 $STEP --set expert_placement=balanced
done
for r in 1 2; do
  ep2 mx-bal-$r 120 --config bench/mixtral_8x7b --set tokens_per_rank=8192 $STEP --set expert_placement=balanced
  ep2 mx-con-$r 120 --config bench/mixtral_8x7b --set tokens_per_rank=8192 $STEP
done
# The balanced placement's check with a graph (its digests differ from contiguous's by design).
ep2 ds-graph-bal-check 240 --config bench/deepseek_v3 --set gemm.method=grouped_sm90 --set graph=true --set expert_placement=balanced --steps 3 --warmup 2 --set warmup_s=0 --set check=first
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
