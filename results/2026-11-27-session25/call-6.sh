#!/usr/bin/env bash
# Session 25, call 6 (2 GPUs): the final tree (two staging boxes for bf16-into-bf16 weight
# gradients; FP8 and fp32 as before) against base 7c4486b. All GPU tests; Qwen3-30B-A3B's check at
# EP 2 (nvlink); bf16 steps at EP 2 (nvlink, bf16 expert gradients), base against tree, two rounds.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
mkdir -p /tmp/base && tar xf devrun/base.tar -C /tmp/base
( cmake -S /tmp/base -B /tmp/base/build -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-base.log 2>&1 &&
  cmake --build /tmp/base/build -j10 --target moebench > $L/build-base.log 2>&1; echo "base build rc=$? at $(el) s" >> $S ) &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j20 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
( CUDA_VISIBLE_DEVICES=0 timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests_all.log 2>&1
  echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_all.log | tr '\n' ' ')" >> $S
  grep -E '^\[  FAILED' $L/tests_all.log | head >> $S ) &
wait
echo "all built at $(el) s" >> $S
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing']['phases']
print('step', round(d['timing']['step']['median'],3), ' '.join(k+' '+str(round(t[k]['median'],3)) for k in ('experts_fwd','experts_bwd') if k in t), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1))" 2>&1 | tail -1; }
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
n=check-ep2-qwen3-bf16
timeout 120 $MPI build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --backend cuda --set check=first --steps 1 --warmup 1 --set roofline=false --set align=16 --set expert_grad_dtype=bf16 --set gemm.method=grouped_sm90 --set mesh.ep=2 --set dispatch=nvlink --timeout-s 100 --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s: $(grep -E '^# check:' $L/$n.log)" >> $S
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60 --steps 12 --warmup 3 --set align=16 --set mesh.ep=2 --set dispatch=nvlink --set gemm.method=grouped_sm90"
for r in 1 2; do
  for w in deepseek_v3 qwen3_30b_a3b; do
    for v in base new; do
      [ $(el) -gt 540 ] && { echo "skip $w $v r$r" >> $S; continue; }
      B=build-gpu/moebench; [ $v = base ] && B=/tmp/base/build/moebench
      n=$w-$v-r$r
      timeout 90 $MPI $B run --config configs/bench/$w.json $COMMON --out $L/$n.json > $L/$n.log 2>&1
      echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
    done
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
