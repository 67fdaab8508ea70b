#!/usr/bin/env bash
# Session 20, call 2 (1 GPU): the router's backward GEMMs on the tensor cores (three bf16 terms),
# the layout kernels' block-wide scans, the loss statistics' smaller chunks: the GPU tests, then
# Qwen3-30B-A3B and DeepSeek-V3 steps at EP 1 against the tree before them (base, 9c4f549), built
# side by side, alternating runs.
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
grep -E "error" $L/build.log | head -5 >> $S
timeout 200 build-gpu/tests/moe_cuda_tests --gtest_filter='RouterGrads*:DispatchCuda*:RouterCuda*:Dedup*:Allgather*' > $L/tests_focus.log 2>&1
echo "focused tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_focus.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests_focus.log | head >> $S
wait
echo "both built at $(el) s" >> $S
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60 --steps 20 --warmup 8"
for round in 1 2; do
  for v in base new; do
    B=build-gpu/moebench; [ $v = base ] && B=/tmp/base/build/moebench
    for m in qwen3_30b_a3b deepseek_v3; do
      for a in 1 16; do
        [ $m = deepseek_v3 ] && [ $a = 16 ] && continue
        n=$m-a$a-$v-r$round
        timeout 100 $B run --config configs/bench/$m.json $COMMON --set align=$a --out $L/$n.json > $L/$n.log 2>&1
        echo "== $n rc=$? at $(el) s: step $(python3 -c "import json;d=json.load(open('$L/$n.json'));t=d['timing']['phases'];print(round(d['timing']['step']['median'],3), 'router_fwd', round(t['router_fwd']['median'],3), 'layout', round(t['layout']['median'],3), 'router_bwd', round(t['router_bwd']['median'],3), 'dispatch_fwd', round(t['dispatch_fwd']['median'],3))" 2>&1 | tail -1)" >> $S
      done
    done
  done
done
[ $(el) -lt 420 ] && timeout 150 build-gpu/tests/moe_cuda_tests > $L/tests_all.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_all.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests_all.log | head >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
