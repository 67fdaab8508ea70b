#!/usr/bin/env bash
# Session 20, call 3 (1 GPU): + alltoall at ep 1 with align > 1 places rows directly (no regroup).
# GPU tests; the check on Qwen3-30B-A3B (align 1 and 16) and Mixtral-8x7B (2048 tokens, align 16),
# digests against the base tree's (9c4f549); then base against new, alternating, at EP 1.
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
  cmake --build /tmp/base/build -j8 --target moebench > $L/build-base.log 2>&1; echo "base build rc=$?" >> $S ) &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 150 build-gpu/tests/moe_cuda_tests > $L/tests_all.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_all.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests_all.log | head >> $S
wait
echo "both built at $(el) s" >> $S
digest() { python3 -c "
import json,sys
a,b=(json.load(open(f)) for f in sys.argv[1:3])
print('digests equal:', ' '.join(k for k in a['digests'] if a['digests'][k]==b['digests'].get(k)), '| differ:', ' '.join(k for k in a['digests'] if a['digests'][k]!=b['digests'].get(k)))" $1 $2; }
CHK="--backend cuda --set check=first --steps 2 --warmup 1 --set roofline=false --timeout-s 60"
for spec in "qwen3_30b_a3b 1 4096" "qwen3_30b_a3b 16 4096" "mixtral_8x7b 16 2048"; do
  set -- $spec
  for v in base new; do
    B=build-gpu/moebench; [ $v = base ] && B=/tmp/base/build/moebench
    n=check-$1-a$2-$v
    timeout 120 $B run --config configs/bench/$1.json $CHK --set align=$2 --set tokens_per_rank=$3 --set gemm.method=grouped_sm90 --out $L/$n.json > $L/$n.log 2>&1
    echo "== $n rc=$? at $(el) s: $(grep -E '^# check:' $L/$n.log)" >> $S
  done
  echo "   $(digest $L/check-$1-a$2-base.json $L/check-$1-a$2-new.json)" >> $S
done
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60 --steps 20 --warmup 8"
row() { python3 -c "import json;d=json.load(open('$1'));t=d['timing']['phases'];print(round(d['timing']['step']['median'],3), ' '.join(k+' '+str(round(t[k]['median'],3)) for k in ('router_fwd','layout','dispatch_fwd','combine_fwd','combine_bwd','dispatch_bwd','router_bwd')))" 2>&1 | tail -1; }
for round in 1 2; do
  for v in base new; do
    B=build-gpu/moebench; [ $v = base ] && B=/tmp/base/build/moebench
    for spec in "qwen3_30b_a3b 16" "deepseek_v3 16" "mixtral_8x7b 1"; do
      set -- $spec
      [ $(el) -gt 520 ] && continue
      n=$1-a$2-$v-r$round
      timeout 100 $B run --config configs/bench/$1.json $COMMON --set align=$2 --out $L/$n.json > $L/$n.log 2>&1
      echo "== $n rc=$? at $(el) s: step $(row $L/$n.json)" >> $S
    done
  done
done
[ $(el) -lt 540 ] && { n=qwen3_30b_a3b-a1-fuse-new; timeout 40 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json $COMMON --set gemm.method=grouped_sm90 --set gemm.sm90_fuse_swiglu=true --out $L/$n.json > $L/$n.log 2>&1; echo "== $n rc=$? at $(el) s: step $(row $L/$n.json)" >> $S;
  n=qwen3_30b_a3b-a1-nofuse-new; timeout 40 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json $COMMON --set gemm.method=grouped_sm90 --out $L/$n.json > $L/$n.log 2>&1; echo "== $n rc=$? at $(el) s: step $(row $L/$n.json)" >> $S; }
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
