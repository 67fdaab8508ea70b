#!/usr/bin/env bash
# Session 43, call 5 (nvidia-h200-x2): main f61c462. Issue 16 at EP 2 under issue 14's best
# DeepSeek-V3 schedule (nvlink, balanced placement, graphs; call 2): bf16 against fp8_block,
# fp8_block with FP8 dispatch, and fp8_tensor (weights quantized once, `fp8_weights: cached`),
# alternating, two rounds; then the FP8-dispatch variant's check at EP 2 with a graph.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
ep2() {  # tag timeout [more]
  local n=$1 tmo=$2; shift 2
  [ $(el) -gt 330 ] && { echo "== $n skipped (time)" >> $S; return; }
  timeout $tmo mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    $B run --backend cuda --set mesh.ep=2 --set dispatch=nvlink --set align=16 --set roofline=false \
    --set expert_grad_dtype=bf16 --set expert_placement=balanced --set gemm.method=grouped_sm90 --set graph=true \
    --timeout-s $((tmo - 10)) "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd|dispatch_fwd|combine_fwd|combine_bwd|dispatch_bwd) ' $L/$n.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/$n.log | head -1) $(grep -E '^# (check|dispatch)' $L/$n.log | cut -c1-260 | tr '\n' ' ')" >> $S
  grep -E 'error|FAILED' $L/$n.log | head -3 >> $S
}
STEP="--config bench/deepseek_v3 --set check=off --set warmup_s=3 --steps 20 --warmup 5"
for r in 1 2; do
  ep2 ds-bf16-$r 80 $STEP
  ep2 ds-fp8b-$r 80 $STEP --set precision=fp8_block --set fp8_weights=cached
  ep2 ds-fp8b-d8-$r 80 $STEP --set precision=fp8_block --set fp8_weights=cached --set dispatch_dtype=fp8
  ep2 ds-fp8t-$r 80 $STEP --set precision=fp8_tensor --set fp8_weights=cached
done
ep2 ds-fp8b-d8-check 200 --config bench/deepseek_v3 --set precision=fp8_block --set dispatch_dtype=fp8 --steps 3 --warmup 2 --set warmup_s=0 --set check=first
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
