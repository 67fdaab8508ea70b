#!/usr/bin/env bash
# Session 20, call 4 (2 GPUs): the session's changes at EP 2 (router backward on the tensor cores,
# the layout's scans) against the base tree (9c4f549), alternating: the three bench workloads with
# dispatch nvlink (Qwen3-30B-A3B also with graph true), align 16 as the 2026-11-27-nvlink table;
# one check with graph at EP 2.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
mkdir -p /tmp/base && tar xf devrun/base.tar -C /tmp/base
( cmake -S /tmp/base -B /tmp/base/build -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-base.log 2>&1 &&
  cmake --build /tmp/base/build -j12 --target moebench > $L/build-base.log 2>&1; echo "base build rc=$?" >> $S ) &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j20 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
wait
echo "both built at $(el) s" >> $S
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
n=check-qwen3-nvlink-graph
timeout 90 $MPI build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --backend cuda --set mesh.ep=2 --set align=16 --set dispatch=nvlink --set graph=true --set check=first --steps 3 --warmup 2 --set roofline=false --timeout-s 60 --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s: $(grep -E '^# check:' $L/$n.log) $(grep -E '^# host' $L/$n.log)" >> $S
COMMON="--backend cuda --set mesh.ep=2 --set align=16 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60 --steps 20 --warmup 8 --set dispatch=nvlink"
row() { python3 -c "import json;d=json.load(open('$1'));t=d['timing']['phases'];print(round(d['timing']['step']['median'],3), ' '.join(k+' '+str(round(t[k]['median'],3)) for k in ('router_fwd','layout','dispatch_fwd','combine_fwd','combine_bwd','dispatch_bwd','router_bwd','grad_sync','counts_exchange')))" 2>&1 | tail -1; }
for round in 1 2; do
  for v in base new; do
    B=build-gpu/moebench; [ $v = base ] && B=/tmp/base/build/moebench
    for spec in "qwen3_30b_a3b false" "qwen3_30b_a3b true" "deepseek_v3 false" "mixtral_8x7b false"; do
      set -- $spec
      [ $(el) -gt 500 ] && continue
      n=$1-g$2-$v-r$round
      timeout 100 $MPI $B run --config configs/bench/$1.json $COMMON --set graph=$2 --out $L/$n.json > $L/$n.log 2>&1
      echo "== $n rc=$? at $(el) s: step $(row $L/$n.json)" >> $S
    done
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
