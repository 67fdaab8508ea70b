#!/usr/bin/env bash
# Session 28, call 5 (2 GPUs): Mixtral-8x7B fp8_tensor at EP 2 (8192 tokens, nvlink, fp8_weights
# cached): how cuBLASLt algorithms are chosen for new row counts (gemm.algo auto / bucket / exact,
# alternating, two rounds), and our grouped kernel for the same step.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j30 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];p=t['phases'];g=d['gemm']
print('step', round(t['step']['median'],3), 'experts', round(p['experts_fwd']['median'],3), round(p['experts_bwd']['median'],3), 'host', round(t['host']['issue_ms']['median'],3), 'clocks', [round(r['sm_mhz']['median']) for r in t['clocks']['ranks']])" 2>&1 | tail -1; }
go() {  # name [more]
  local n=$1; shift
  [ $(el) -gt 480 ] && { echo "skip $n" >> $S; return; }
  timeout 150 mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    $B run --config configs/bench/mixtral_8x7b.json --backend cuda --set expert_grad_dtype=bf16 --set roofline=false \
    --set align=16 --set mesh.ep=2 --set check=off --steps 20 --warmup 8 --set tokens_per_rank=8192 --set dispatch=nvlink \
    --set precision=fp8_tensor --set fp8_weights=cached "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (expert GEMMs|warning)' $L/$n.log >> $S
}
for r in 1 2; do
  for a in auto bucket exact; do go fp8t-lt-$a-r$r --set gemm.method=lt_multistream --set gemm.algo=$a; done
done
go fp8t-grouped --set gemm.method=grouped_sm90
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
