#!/usr/bin/env bash
# Session 22, call 1 (1 GPU): the check's expert gradients compared one expert at a time (the
# reference's float64 gradients never held whole) and the layout kernels' predicates evaluated once
# (for_each_marked's unmarked callback). All GPU tests; DeepSeek-V3's bench workload at EP 1 checked
# by the GPU reference with graph false and true (digests compared), its peak RSS and check time.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
free -g | head -2 >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests_all.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_all.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests_all.log | head >> $S
grep -E 'ExpertGradSink|Capacity|DedupCuda' $L/tests_all.log | grep -E 'OK|FAILED' | head -20 >> $S
digest() { python3 -c "
import json,sys
a,b=(json.load(open(f)) for f in sys.argv[1:3])
print('digests equal:', ' '.join(k for k in a['digests'] if a['digests'][k]==b['digests'].get(k)), '| differ:', ' '.join(k for k in a['digests'] if a['digests'][k]!=b['digests'].get(k)))" $1 $2; }
CHK="--backend cuda --set check=first --steps 2 --warmup 1 --set roofline=false --timeout-s 120"
for g in false true; do
  n=check-deepseek-ep1-graph-$g
  /usr/bin/time -v timeout 400 build-gpu/moebench run --config configs/bench/deepseek_v3.json $CHK --set gemm.method=grouped_sm90 --set graph=$g --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# check:|peak RSS|Maximum resident' $L/$n.log | tr '\n' ' ')" >> $S
  grep -E '^# correctness|^  (out|dx|dw_|p |aux|z |loss|routing)' $L/$n.log >> $S
  [ $(el) -gt 480 ] && break
done
[ -f $L/check-deepseek-ep1-graph-true.json ] && echo "graph true vs false: $(digest $L/check-deepseek-ep1-graph-false.json $L/check-deepseek-ep1-graph-true.json)" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
