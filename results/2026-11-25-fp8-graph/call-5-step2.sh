#!/usr/bin/env bash
# Session 15, call 5 (one H200): is call 4's tiny check failure at step 2 (fp8_tensor, one shared
# expert, check every step: dx 1.46e-2) the graph's? The same runs with graph false and true, their
# digests, and the fp8_block refusal with graph (warmup 2).
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 --target moebench > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built at $(( $(date +%s) - START )) s" >> $S
B="build-gpu/moebench run --config configs/tiny.json --backend cuda --set align=16 --steps 3 --warmup 2 --set check=every"
for sh in 1 0; do
  for g in false true; do
    for m in grouped_sm90 lt_multistream; do
      [ $g = true ] && [ $m = lt_multistream ] && continue
      n=tiny_shared${sh}_graph_${g}_$m
      timeout 60 $B --set precision=fp8_tensor --set graph=$g --set gemm.method=$m --set model.shared_experts=$sh --set model.shared_ffn=48 --out $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1
      echo "== $n rc=$? $(grep -E '^# check|^# checked' $OUT/logs/$n.log | tr '\n' ' ') $(grep -E '^  (dx|dw_sh_in) .*FAIL' $OUT/logs/$n.log | tr -s ' ' | tr '\n' ';')" >> $S
    done
  done
done
python3 - $OUT/logs >> $S <<'PY'
import json, sys
d = sys.argv[1]
for sh in (1, 0):
    a = json.load(open(f"{d}/tiny_shared{sh}_graph_false_grouped_sm90.json")); b = json.load(open(f"{d}/tiny_shared{sh}_graph_true_grouped_sm90.json"))
    print(f"shared {sh}: digests equal graph false/true:", all(a["digests"][k] == b["digests"][k] for k in a["digests"]))
PY
timeout 60 build-gpu/moebench run --config configs/tiny.json --backend cuda --set align=16 --set precision=fp8_block --set graph=true --warmup 2 > $OUT/logs/tiny_block_graph.log 2>&1; echo "== fp8_block graph (refused) rc=$? $(grep -i 'error' $OUT/logs/tiny_block_graph.log | head -1 | cut -c1-260)" >> $S
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
