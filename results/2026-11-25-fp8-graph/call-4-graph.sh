#!/usr/bin/env bash
# Session 15, call 4 (one H200): fp8_tensor in the sync-free step (graph: true, the grouped kernel).
# GPU tests; tiny checks with graph (with and without the pipeline, shared experts); the Qwen3-30B-A3B
# FP8 check with graph; then same-call steps, graph false vs true: Qwen3-30B-A3B and Mixtral-8x7B
# fp8_tensor on grouped_sm90, and Qwen3 bf16 for the ratio.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception" $OUT/logs/gpu_tests.txt | head -20 >> $S
B="build-gpu/moebench run --config configs/tiny.json --backend cuda --set align=16 --set precision=fp8_tensor --set graph=true --steps 3 --warmup 2"
for ov in none pipeline; do
  for disp in alltoall allgather; do
    n=tiny_graph_${ov}_$disp
    timeout 60 $B --set overlap=$ov --set dispatch=$disp --set model.shared_experts=1 --set model.shared_ffn=48 --set check=every > $OUT/logs/$n.log 2>&1; echo "== $n rc=$? $(grep -E '^# check|graph|host:' $OUT/logs/$n.log | tr '\n' ' ' | cut -c1-300)" >> $S
  done
done
timeout 60 build-gpu/moebench run --config configs/tiny.json --backend cuda --set align=16 --set precision=fp8_block --set graph=true > $OUT/logs/tiny_block_graph.log 2>&1; echo "== fp8_block graph (refused) rc=$? $(grep -i 'error' $OUT/logs/tiny_block_graph.log | head -1 | cut -c1-200)" >> $S
timeout 150 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=256 --set check=first --steps 2 --warmup 2 --backend cuda --set align=16 --set precision=fp8_tensor --set graph=true > $OUT/logs/qwen3_check.log 2>&1; echo "== qwen3 check fp8_tensor graph rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out) |^# check" $OUT/logs/qwen3_check.log >> $S
run() {  # name workload precision graph
  timeout 100 build-gpu/moebench run --config configs/bench/$2.json --set tokens_per_rank=8192 --set precision=$3 --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 6 --set gemm.method=grouped_sm90 --set graph=$4 --out $OUT/logs/$1.json > $OUT/logs/$1.log 2>&1
  echo "== $1 rc=$? $(grep -E '^  step ' $OUT/logs/$1.log | tr -s ' ' | cut -d' ' -f2-5) | $(grep -E '^# host:' $OUT/logs/$1.log | cut -c1-110) | $(grep -E 'memory: high' $OUT/logs/$1.log | cut -c1-50)" >> $S
}
for rep in 1 2; do
  for g in false true; do
    run qwen3_fp8_graph_${g}_$rep qwen3_30b_a3b fp8_tensor $g
    run mixtral_fp8_graph_${g}_$rep mixtral_8x7b fp8_tensor $g
  done
  run qwen3_bf16_graph_true_$rep qwen3_30b_a3b bf16 true
done
python3 - $OUT/logs >> $S <<'PY'
import json, sys
d = sys.argv[1]
for m in ("qwen3", "mixtral"):
    try:
        a = json.load(open(f"{d}/{m}_fp8_graph_false_1.json")); b = json.load(open(f"{d}/{m}_fp8_graph_true_1.json"))
        print(m, "digests equal graph false/true:", all(a["digests"][k] == b["digests"][k] for k in a["digests"]))
    except Exception as e:
        print(m, "no digests:", e)
PY
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
