#!/usr/bin/env bash
# Session 20, call 8 (1 GPU): issue 15's last unrun check: DeepSeek-V3 at EP 1 with dispatch nvlink
# and graph true against the fp32 GPU reference, and its digests against the run issued call by
# call (graph false); Qwen3-30B-A3B at EP 1 with graph, this session's step.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
for spec in "qwen3_30b_a3b false" "qwen3_30b_a3b true" "qwen3_30b_a3b false" "qwen3_30b_a3b true"; do
  set -- $spec
  n=$1-graph$2-$(el)
  timeout 60 $B run --config configs/bench/$1.json --backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60 --steps 20 --warmup 8 --set graph=$2 --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  step|^# host' $L/$n.log | tr -s ' ' | tr '\n' ' ')" >> $S
done
n=deepseek_v3-nvlink-graphfalse
timeout 100 $B run --config configs/bench/deepseek_v3.json --backend cuda --set align=16 --set dispatch=nvlink --set graph=false --set check=off --steps 3 --warmup 2 --set roofline=false --timeout-s 60 --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s" >> $S
n=deepseek_v3-nvlink-graphtrue
timeout 330 $B run --config configs/bench/deepseek_v3.json --backend cuda --set align=16 --set dispatch=nvlink --set graph=true --set check=first --steps 3 --warmup 2 --set roofline=false --timeout-s 60 --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s: $(grep -E '^# check:|^# host' $L/$n.log | tr '\n' ' ')" >> $S
python3 -c "
import json
a,b=(json.load(open('$L/deepseek_v3-nvlink-graph'+g+'.json')) for g in ('false','true'))
print('   graph digests equal:', a['digests']==b['digests'], 'waits/step', a['timing']['host']['waits_per_step'], b['timing']['host']['waits_per_step'])" >> $S 2>&1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
