#!/usr/bin/env bash
# Session 43, call 3 (nvidia-h200-x4, four H200s): main a134bc8. Issue 15's nvlink row moves at
# EP 4 against peer copies and NCCL (measured at EP 2 on H200s in session 31, at EP 4 only on
# H100s); DeepSeek-V3 at EP 4 with graphs, balanced against contiguous placement, nvlink and
# alltoall_dedup (session 34 ran them without graphs); Qwen3-30B-A3B at EP 4 with graphs; the
# `# ranks:` line at four ranks; a balanced + graph check at EP 4.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi topo -m > $L/topo.txt 2>&1; nvidia-smi -q -d POWER | grep -E "Power Limit|Current Power" | head -8 >> $L/topo.txt
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
timeout 150 mpirun --allow-run-as-root -np 4 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY $B dispatch --backend cuda --config bench/deepseek_v3 --set mesh.ep=4 \
  --tokens 1024,4096,8192 --dispatchers alltoall_dedup,nvlink --out $L/dispatch.json > $L/dispatch.log 2>&1
echo "== dispatch ep4 rc=$? at $(el) s" >> $S
grep -E "^#|^  " $L/dispatch.log | grep -v "^# moebench\|^# mesh" | head -40 >> $S
ep4() {  # tag timeout [more]
  local n=$1 tmo=$2; shift 2
  [ $(el) -gt 520 ] && { echo "== $n skipped (time)" >> $S; return; }
  timeout $tmo mpirun --allow-run-as-root -np 4 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    $B run --backend cuda --set mesh.ep=4 --set align=16 --set roofline=false \
    --set expert_grad_dtype=bf16 --timeout-s $((tmo - 10)) "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/$n.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/$n.log | head -1) $(grep -E '^# (check|lanes|ranks|throughput)' $L/$n.log | tr '\n' ' ')" >> $S
  grep -E 'error|FAILED' $L/$n.log | head -3 >> $S
}
STEP="--set check=off --set warmup_s=3 --steps 20 --warmup 5"
G="--set gemm.method=grouped_sm90 --set graph=true"
for r in 1 2; do
  ep4 ds-nv-bal-$r 90 --config bench/deepseek_v3 $STEP $G --set dispatch=nvlink --set expert_placement=balanced
  ep4 ds-nv-con-$r 90 --config bench/deepseek_v3 $STEP $G --set dispatch=nvlink
  ep4 ds-dd-bal-$r 90 --config bench/deepseek_v3 $STEP $G --set dispatch=alltoall_dedup --set expert_placement=balanced
done
ep4 qw-nv-graph 60 --config bench/qwen3_30b_a3b $STEP $G --set dispatch=nvlink
ep4 mx-nv 90 --config bench/mixtral_8x7b --set tokens_per_rank=8192 $STEP --set dispatch=nvlink
ep4 ds-nv-bal-graph-check 200 --config bench/deepseek_v3 $G --set dispatch=nvlink --set expert_placement=balanced --steps 3 --warmup 2 --set warmup_s=0 --set check=first
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
