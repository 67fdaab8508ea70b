#!/usr/bin/env bash
# Session 30, call 7 (1 GPU): main at its last commit: moebench gemm --out's config (now the
# validated workload itself) and compare; a checked run; the NaN refusal's wording.
set -uo pipefail
L=$OUT/logs; mkdir -p $L; S=$OUT/summary.txt
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j16 --target moebench > $L/build.log 2>&1
echo "build rc=$?" >> $S
B=build-gpu/moebench
for i in 1 2; do timeout 60 $B gemm --config bench/qwen3_30b_a3b --methods grouped_sm90 --iters 5 --rows routed --out $L/g$i.json > $L/g$i.log 2>&1; echo "== gemm $i rc=$?" >> $S; done
python3 -c "
import json; d=json.load(open('$L/g1.json')); c=d['config']; r=d['rows']
print('config mesh', c['mesh'], 'model', c['model']['hidden'], c['model']['ffn'], 'rows', min(r), max(r), sum(r)/len(r), d['rows_from'], d['ep_rank'])" >> $S 2>&1
$B compare $L/g1.json $L/g2.json > $L/cmp.log 2>&1; echo "== compare rc=$?: $(sed -n 4p $L/cmp.log)" >> $S
timeout 60 $B run --config tiny --backend cuda --set check=first --steps 2 > $L/r.log 2>&1; echo "== run rc=$?: $(grep '^# check' $L/r.log)" >> $S
$B run --config tiny --backend cuda --timeout-s nan > $L/e.log 2>&1; echo "== --timeout-s nan rc=$?: $(head -1 $L/e.log)" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
