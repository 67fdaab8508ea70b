#!/usr/bin/env bash
# Session 41, call 1 (one H200): session 40's prepared diffs in one call.
# review-shared-helpers.diff + review-ep1-counts.diff (the stop review's mends) and
# quant-tiny-test.diff (a GPU test of the quantization kernels on tiny values and scales), built
# together; every GPU test; then the review's two reversed (the test stays: tests only) and the old
# moebench built in the same tree: digests of 4 workloads new vs old, a graph check, and the
# Qwen3-30B-A3B graph step new and old alternating.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
R=results/2026-11-29-session40
git apply $R/review-shared-helpers.diff $R/review-ep1-counts.diff $R/quant-tiny-test.diff && echo "applied" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build new rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-new
timeout 300 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Failure|Expected|Which is' $L/tests.log | head -30 >> $S
grep -E 'TinyValues' $L/tests.log >> $S
git apply -R $R/review-shared-helpers.diff $R/review-ep1-counts.diff && echo "reversed" >> $S
cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build-old.log 2>&1
echo "build old rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-old
for c in qw qwpos ds mxfp8; do for v in new old; do
  case $c in
    qw) args="--config bench/qwen3_30b_a3b";;
    qwpos) args="--config bench/qwen3_30b_a3b --set capacity_factor=1.0 --set drop_policy=position";;
    ds) args="--config bench/deepseek_v3 --set tokens_per_rank=1024";;
    mxfp8) args="--config bench/mixtral_8x7b --set tokens_per_rank=1024 --set precision=fp8_tensor";;
  esac
  timeout 90 /tmp/mb-$v run --backend cuda $args --set align=16 --set check=off --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 --out $L/dig-$c-$v.json > $L/dig-$c-$v.log 2>&1
  echo "== digests $c $v rc=$? at $(el) s" >> $S
done
python3 - "$L/dig-$c-new.json" "$L/dig-$c-old.json" >> $S 2>&1 <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
print('digests equal:', a.get('digests') == b.get('digests'), '|', json.dumps(a.get('digests'))[:200])
PY
done
timeout 120 /tmp/mb-new run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set graph=true --set check=first --set roofline=false --steps 2 --warmup 2 > $L/check-graph.log 2>&1
echo "== check graph rc=$? at $(el) s: $(grep -E '^# check' $L/check-graph.log)" >> $S
for r in 1 2; do for v in new old; do
  timeout 100 /tmp/mb-$v run --backend cuda --config bench/qwen3_30b_a3b --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=4 --set roofline=false --set graph=true --steps 50 --warmup 5 > $L/qw-$v-$r.log 2>&1
  echo "== qw graph $v $r rc=$? at $(el) s: $(grep -E '^  (step|layout) |^   counts_exchange' $L/qw-$v-$r.log | awk '{print $1, $2}' | tr '\n' ' ')" >> $S
done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
