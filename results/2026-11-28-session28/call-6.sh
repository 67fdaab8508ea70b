#!/usr/bin/env bash
# Session 28, call 6 (4 GPUs): DeepSeek-V3 at EP 4 (nvlink, grouped_sm90), contiguous against
# balanced placement, with each rank's clocks: how much of the all-to-all wait the clocks explain.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j60 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];p=t['phases'];l=t['lanes']
print('step', round(t['step']['median'],3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1), 'experts', round(p['experts_fwd']['median']+p['experts_bwd']['median'],3), 'a2a', round(l['a2a']['median'],3), 'least', round(l['a2a_least_rank']['median'],3), 'rankload', round(d['routing']['rank_load_max_over_mean'],3), 'MHz', [round(r['sm_mhz']['median']) for r in t['clocks']['ranks']])" 2>&1 | tail -1; }
go() {  # name [more]
  local n=$1; shift
  [ $(el) -gt 330 ] && { echo "skip $n" >> $S; return; }
  timeout 120 mpirun --allow-run-as-root -np 4 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    build-gpu/moebench run --config configs/bench/deepseek_v3.json --backend cuda --set expert_grad_dtype=bf16 \
    --set roofline=false --set align=16 --set mesh.ep=4 --set dispatch=nvlink --set gemm.method=grouped_sm90 \
    --set check=off --steps 20 --warmup 8 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (clocks|lanes|warning)' $L/$n.log >> $S
}
for r in 1 2; do
  go deepseek-ep4-cont-r$r --set expert_placement=contiguous
  go deepseek-ep4-bal-r$r --set expert_placement=balanced
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
