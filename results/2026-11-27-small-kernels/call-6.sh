#!/usr/bin/env bash
# Session 20, call 6 (2 GPUs): overlap dispatch_bwd now also sums the shared experts' gradients
# beside the routed backward. DeepSeek-V3 at EP 2 with nvlink: overlap none and dispatch_bwd, this
# tree and the one before (base, fa60d64), alternating; digests of none and dispatch_bwd compared;
# Qwen3-30B-A3B with graph, none against dispatch_bwd.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT (+ working tree)" >> $S
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
COMMON="--backend cuda --set mesh.ep=2 --set align=16 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60 --steps 20 --warmup 8 --set dispatch=nvlink"
row() { python3 -c "import json;d=json.load(open('$1'));t=d['timing']['phases'];l=d['timing']['lanes'];print(round(d['timing']['step']['median'],3), ' '.join(k+' '+str(round(t[k]['median'],3)) for k in ('experts_bwd','shared_bwd','dispatch_bwd','router_bwd','grad_sync') if k in t))" 2>&1 | tail -1; }
for round in 1 2; do
  for v in base new; do
    B=build-gpu/moebench; [ $v = base ] && B=/tmp/base/build/moebench
    for o in none dispatch_bwd; do
      [ $(el) -gt 400 ] && continue
      n=deepseek_v3-$o-$v-r$round
      timeout 100 $MPI $B run --config configs/bench/deepseek_v3.json $COMMON --set overlap=$o --out $L/$n.json > $L/$n.log 2>&1
      echo "== $n rc=$? at $(el) s: step $(row $L/$n.json)" >> $S
    done
  done
done
python3 -c "
import json
a,b=(json.load(open('$L/deepseek_v3-'+o+'-new-r1.json')) for o in ('none','dispatch_bwd'))
print('   DeepSeek-V3 none and dispatch_bwd digests equal:', a['digests']==b['digests'], sorted(a['digests']))" >> $S
grep -E "^# (overlap|lanes)" $L/deepseek_v3-dispatch_bwd-new-r1.log >> $S
for o in none dispatch_bwd none dispatch_bwd; do
  [ $(el) -gt 470 ] && continue
  n=qwen3-graph-$o-$(el)
  timeout 60 $MPI build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json $COMMON --set graph=true --set overlap=$o --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: step $(row $L/$n.json)" >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
