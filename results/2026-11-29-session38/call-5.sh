#!/usr/bin/env bash
# Session 38, call 5 (one H200; run as devrun/call-6.sh): main as it stands (clean). Issue 16's DeepSeek-V3 figure at EP 1:
# bf16, fp8_tensor and fp8_block in alternation (cached FP8 weights, bf16 weight gradients); issue
# 15's Qwen3-30B-A3B step with graphs and bf16 weight gradients (as sessions 32-36 measured it).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
step() {  # tag config [more]
  local n=$1 c=$2; shift 2
  timeout 100 $B run --backend cuda --config bench/$c --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=4 --set roofline=false --steps 20 --warmup 5 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/$n.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/$n.log) $(grep -E '^# expert GEMMs' $L/$n.log | cut -c1-40)" >> $S
  grep -E 'error' $L/$n.log | head -3 >> $S
}
for r in 1 2; do
  step ds-bf16-$r deepseek_v3
  step ds-fp8t-$r deepseek_v3 --set precision=fp8_tensor --set fp8_weights=cached
  step ds-fp8b-$r deepseek_v3 --set precision=fp8_block --set fp8_weights=cached
done
for r in 1 2; do step qw-graph-$r qwen3_30b_a3b --set graph=true --steps 50; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
