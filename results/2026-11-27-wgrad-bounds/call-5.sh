#!/usr/bin/env bash
# Session 21, call 5 (1 GPU): the tree at HEAD (router statistics' second pass by warps, the
# capacity placement through for_each_marked, every dispatch at ep 1 through alltoall's path)
# against the session's base b5a81f1, built beside it. All GPU tests; the check on Qwen3-30B-A3B
# with dispatch allgather and alltoall_dedup at align 1 and 16 (new) against alltoall (base),
# digests compared; per-kernel ncu durations of one Qwen3-30B-A3B step; base against new steps,
# alternating.
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
CHK="--backend cuda --set check=first --steps 2 --warmup 1 --set roofline=false --timeout-s 60 --set gemm.method=grouped_sm90"
for a in 1 16; do
  n=check-a$a-alltoall-base
  timeout 120 /tmp/base/build/moebench run --config configs/bench/qwen3_30b_a3b.json $CHK --set align=$a --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# check:' $L/$n.log)" >> $S
  for disp in alltoall allgather alltoall_dedup; do
    n=check-a$a-$disp-new
    timeout 120 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json $CHK --set align=$a --set dispatch=$disp --out $L/$n.json > $L/$n.log 2>&1
    echo "== $n rc=$? at $(el) s: $(grep -E '^# check:' $L/$n.log)" >> $S
    echo "   against base alltoall: $(digest $L/check-a$a-alltoall-base.json $L/$n.json)" >> $S
  done
done
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60"
timeout 150 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
  build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json $COMMON --steps 1 --warmup 6 --profile > $L/qwen3-ncu.csv 2> $L/qwen3-ncu.err
echo "== ncu qwen3 rc=$? at $(el) s" >> $S
python3 - $L/qwen3-ncu.csv >> $S <<'PY'
import csv, collections, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[0].isdigit()]
agg = collections.defaultdict(lambda: [0, 0.0])
for r in rows:
    name = r[4].split('(')[0].replace('void ', '')[:80]
    agg[name][0] += 1; agg[name][1] += float(r[14].replace(',', ''))
for k, v in sorted(agg.items(), key=lambda x: -x[1][1])[:24]:
    print(f"  {v[1]/1000:8.1f} us {v[0]:3d}x  {k}")
print(f"  total {sum(v[1] for v in agg.values())/1000:.1f} us")
PY
row() { python3 -c "import json;d=json.load(open('$1'));t=d['timing']['phases'];print(round(d['timing']['step']['median'],3), ' '.join(k+' '+str(round(t[k]['median'],3)) for k in ('router_fwd','layout','dispatch_fwd','combine_fwd','combine_bwd','dispatch_bwd','router_bwd')))" 2>&1 | tail -1; }
for round in 1 2; do
  for v in base new; do
    B=build-gpu/moebench; [ $v = base ] && B=/tmp/base/build/moebench
    for spec in "qwen3_30b_a3b alltoall" "qwen3_30b_a3b allgather" "deepseek_v3 alltoall"; do
      set -- $spec
      [ $(el) -gt 520 ] && continue
      n=$1-$2-$v-r$round
      timeout 100 $B run --config configs/bench/$1.json $COMMON --steps 20 --warmup 8 --set dispatch=$2 --out $L/$n.json > $L/$n.log 2>&1
      echo "== $n rc=$? at $(el) s: step $(row $L/$n.json)" >> $S
    done
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
