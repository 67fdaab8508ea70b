#!/usr/bin/env bash
# Session 26, call 10 (one H100): router_topk a warp per token (no group-limited routing, E <= 256):
# all GPU tests; the Qwen3-30B-A3B bench workload exactly as call 9 ran it (digests must equal
# call 9's: the warp kernel reduces in the block kernel's order); the kernel's time under ncu as
# call 1 measured it (21.7 us a step at 4096 tokens, E 128, K 8).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j16 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests_all.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_all.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests_all.log | head >> $S
grep -E 'RouterCuda.*(OK|FAILED)' $L/tests_all.log >> $S
n=qwen3-graph-check
timeout 150 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --backend cuda --set check=first --steps 20 --warmup 3 --set graph=true --set align=16 --set expert_grad_dtype=bf16 --set gemm.method=grouped_sm90 --set roofline=false --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s" >> $S
grep -E '^# (mesh|check)|^  (step|router_fwd) ' $L/$n.log >> $S
python3 -c "import json;print('digests', json.load(open('$L/$n.json'))['digests'])" >> $S
COMMON="--backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --set gemm.method=grouped_sm90 --set warmup_s=0 --timeout-s 60"
timeout 100 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
  build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json $COMMON --steps 1 --warmup 6 --profile > $L/ncu.csv 2> $L/ncu.err
echo "== ncu rc=$? at $(el) s" >> $S
python3 - $L/ncu.csv >> $S <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit")
for r in rows[1:]:
    if "router" in r[ki]: print("  ", r[ki][:60], r[vi], r[ui])
PY
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
