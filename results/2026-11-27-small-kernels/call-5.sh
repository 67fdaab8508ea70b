#!/usr/bin/env bash
# Session 20, call 5 (2 GPUs): the deduplicated layout in chunks (many blocks, not one per rank).
# GPU tests; checks at EP 2 with alltoall_dedup and nvlink, their digests equal; the three bench
# workloads with nvlink (and Qwen3-30B-A3B with dedup) against the tree before (base, 26e858e),
# alternating.
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
  cmake --build build-gpu -j20 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 150 build-gpu/tests/moe_cuda_tests > $L/tests_all.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_all.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests_all.log | head >> $S
wait
echo "both built at $(el) s" >> $S
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
for d in alltoall_dedup nvlink; do
  n=check-qwen3-$d
  timeout 90 $MPI build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --backend cuda --set mesh.ep=2 --set align=16 --set dispatch=$d --set check=first --steps 3 --warmup 2 --set roofline=false --timeout-s 60 --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# check:' $L/$n.log)" >> $S
done
python3 -c "
import json
a,b=(json.load(open('$L/check-qwen3-'+d+'.json')) for d in ('alltoall_dedup','nvlink'))
print('   dedup and nvlink digests equal:', a['digests']==b['digests'])" >> $S
COMMON="--backend cuda --set mesh.ep=2 --set align=16 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60 --steps 20 --warmup 8"
row() { python3 -c "import json;d=json.load(open('$1'));t=d['timing']['phases'];print(round(d['timing']['step']['median'],3), ' '.join(k+' '+str(round(t[k]['median'],3)) for k in ('router_fwd','layout','counts_exchange','dispatch_fwd','combine_fwd','combine_bwd','dispatch_bwd','router_bwd')))" 2>&1 | tail -1; }
for round in 1 2; do
  for v in base new; do
    B=build-gpu/moebench; [ $v = base ] && B=/tmp/base/build/moebench
    for spec in "qwen3_30b_a3b nvlink true" "qwen3_30b_a3b alltoall_dedup false" "deepseek_v3 nvlink false" "mixtral_8x7b nvlink false"; do
      set -- $spec
      [ $(el) -gt 480 ] && continue
      n=$1-$2-g$3-$v-r$round
      timeout 100 $MPI $B run --config configs/bench/$1.json $COMMON --set dispatch=$2 --set graph=$3 --out $L/$n.json > $L/$n.log 2>&1
      echo "== $n rc=$? at $(el) s: step $(row $L/$n.json)" >> $S
    done
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
