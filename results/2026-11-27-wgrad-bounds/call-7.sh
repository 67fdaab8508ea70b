#!/usr/bin/env bash
# Session 21, call 7 (1 GPU): the grouped kernel's cooperative warpgroup whose 64 rows lie past a
# ragged group's rows passes its stages on without MMAs. GPU tests; the check on Qwen3-30B-A3B
# (learned routing: 233-276 rows per expert, so many last M tiles hold under 64 rows) with
# digests against the base (HEAD 9539cb1, built beside); base against new steps, alternating.
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
timeout 100 build-gpu/tests/moe_cuda_tests > $L/tests_all.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_all.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests_all.log | head >> $S
wait
echo "both built at $(el) s" >> $S
digest() { python3 -c "
import json,sys
a,b=(json.load(open(f)) for f in sys.argv[1:3])
print('digests equal:', ' '.join(k for k in a['digests'] if a['digests'][k]==b['digests'].get(k)), '| differ:', ' '.join(k for k in a['digests'] if a['digests'][k]!=b['digests'].get(k)))" $1 $2; }
CHK="--backend cuda --set check=first --steps 2 --warmup 1 --set roofline=false --timeout-s 60 --set gemm.method=grouped_sm90"
for v in base new; do
  B=build-gpu/moebench; [ $v = base ] && B=/tmp/base/build/moebench
  timeout 60 $B run --config configs/bench/qwen3_30b_a3b.json $CHK --set align=16 --out $L/check-$v.json > $L/check-$v.log 2>&1
  echo "== check-$v rc=$? at $(el) s: $(grep -E '^# check:' $L/check-$v.log)" >> $S
done
echo "   $(digest $L/check-base.json $L/check-new.json)" >> $S
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60 --steps 20 --warmup 8 --set gemm.method=grouped_sm90"
row() { python3 -c "
import json; d=json.load(open('$1')); t=d['timing']['phases']
print(round(d['timing']['step']['median'],3), 'experts_fwd', round(t['experts_fwd']['median'],3), 'experts_bwd', round(t['experts_bwd']['median'],3))" 2>&1 | tail -1; }
for round in 1 2; do
  for v in base new; do
    B=build-gpu/moebench; [ $v = base ] && B=/tmp/base/build/moebench
    for spec in "qwen3_30b_a3b 1" "qwen3_30b_a3b 16" "deepseek_v3 1"; do
      set -- $spec
      [ $(el) -gt 300 ] && continue
      n=$1-a$2-$v-r$round
      timeout 60 $B run --config configs/bench/$1.json $COMMON --set align=$2 --out $L/$n.json > $L/$n.log 2>&1
      echo "== $n rc=$? at $(el) s: step $(row $L/$n.json)" >> $S
    done
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
