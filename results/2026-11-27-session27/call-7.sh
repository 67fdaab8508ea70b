#!/usr/bin/env bash
# Session 27, call 7 (4 GPUs, the warm machine of calls 5-6): overlap dispatch_bwd before
# (87f730e, built here from devrun/base) and after (001a0bc, call 5's build) the shared experts'
# gradient reduction moved beside the routed weight gradients, alternating, on DeepSeek-V3's bench
# workload with balanced placement at EP 4 and (GPUs 0-1) EP 2.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
(cd devrun/base && MOE_GIT_COMMIT=87f730e cmake -S . -B ../../build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > $L/cmake-base.log 2>&1 &&
  cmake --build ../../build-base -j60 --target moebench > $L/build-base.log 2>&1)
echo "base build rc=$? at $(el) s" >> $S
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];l=t['lanes'];p=t['phases']
print('step', round(t['step']['median'],3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1), 'drift', None if t['step_drift'] is None else [round(x,2) for x in t['step_drift']['thirds_ms']], 'a2a', round(l['a2a']['median'],3), 'exposed', round(l['a2a_exposed']['median'],3) if 'a2a_exposed' in l else None)
print('  phases', {k: round(v['median'],3) for k,v in p.items() if k in ('experts_bwd','shared_bwd','dispatch_bwd','grad_sync','router_bwd','combine_bwd')})
print('  digests', sorted(d['digests'].items()))" 2>&1 | tail -3; }
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set roofline=false --timeout-s 300 --set align=16 --set dispatch=nvlink --set expert_placement=balanced --set gemm.method=grouped_sm90"
go() {  # name np config [more]; BIN the binary
  local n=$1 np=$2 cfg=$3; shift 3
  [ $(el) -gt 560 ] && { echo "skip $n" >> $S; return; }
  local dev=0,1,2,3; [ $np -eq 2 ] && dev=0,1
  timeout 300 mpirun --allow-run-as-root -np $np -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY -x CUDA_VISIBLE_DEVICES=$dev \
    $BIN run --config configs/bench/$cfg.json $COMMON --set mesh.ep=$np "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (warning|lanes|check|overlap)' $L/$n.log >> $S
}
export CUDA_VISIBLE_DEVICES=0,1,2,3
P="--set check=off --steps 20 --warmup 8 --set overlap=dispatch_bwd"
for r in 1 2; do
  BIN=build-base/moebench MOE_GIT_COMMIT=87f730e209e5002e583435f019e3da5639153988 go ds-ep4-base-$r 4 deepseek_v3 $P
  BIN=build-gpu/moebench go ds-ep4-new-$r 4 deepseek_v3 $P
done
for r in 1 2; do
  BIN=build-base/moebench MOE_GIT_COMMIT=87f730e209e5002e583435f019e3da5639153988 go ds-ep2-base-$r 2 deepseek_v3 $P
  BIN=build-gpu/moebench go ds-ep2-new-$r 2 deepseek_v3 $P
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
