#!/usr/bin/env bash
# Prepared for the next session (one H200 is enough; not run): the stop review's mends
# (review-first-operand-and-choice-check.diff) in both trees, and combine-bwd-warp.diff (the
# combine's backward one warp per routed row, dp reduced by shuffles) applied, against the tree
# without it built in the same call: every GPU test; the kernel under ncu in one Qwen3-30B-A3B and
# one DeepSeek-V3 step; the checks with drops and with graphs; Qwen3-30B-A3B's graph step in
# alternation. dp sums in another order than main's, so digests move (dw_gate, dx): not compared.
# Copy to devrun/ and run from the repository root with BUILD_COMMIT ("<commit> 1") carried.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
D=results/2026-11-29-session39/combine-bwd-warp.diff
# The stop review's mends (behaviour-neutral: with_first_operand for the kept codes, no second
# cublasLtMatmulAlgoCheck on a choice made on the plan itself) go into both trees.
git apply results/2026-11-29-session39/review-first-operand-and-choice-check.diff && echo "review mends applied" >> $S
mkdir -p /tmp/old && tar cf - --exclude=./build-gpu . | (cd /tmp/old && tar xf -)
git apply $D && echo "applied" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build new rc=$? at $(el) s" >> $S
cmake -S /tmp/old -B /tmp/build-old -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-old.log 2>&1 &&
  cmake --build /tmp/build-old -j"$(nproc)" --target moebench > $L/build-old.log 2>&1
echo "build old rc=$? at $(el) s" >> $S
timeout 300 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Failure' $L/tests.log | head -20 >> $S
NCU=/usr/local/cuda/bin/ncu
for w in qwen3_30b_a3b deepseek_v3; do for v in new old; do
  b=build-gpu/moebench; [ $v = old ] && b=/tmp/build-old/moebench
  timeout 120 $NCU --clock-control none --profile-from-start off -k regex:unpermute_combine_bwd --metrics gpu__time_duration.sum $b run --backend cuda --config bench/$w --set align=16 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --set warmup_s=0 --steps 1 --warmup 1 --profile > $L/ncu-$w-$v.log 2>&1
  echo "== ncu $w $v rc=$? at $(el) s: $(grep -E 'gpu__time_duration' $L/ncu-$w-$v.log | awk '{print $NF}' | tr '\n' ' ')" >> $S
done; done
B=build-gpu/moebench
timeout 120 $B run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set capacity_factor=1.0 --set check=first --set roofline=false --steps 2 --warmup 2 --out $L/check-cap.json > $L/check-cap.log 2>&1
echo "== check capacity rc=$? at $(el) s: $(grep -E '^# check' $L/check-cap.log)" >> $S
timeout 120 $B run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set graph=true --set check=first --set roofline=false --steps 2 --warmup 2 --out $L/check-graph.json > $L/check-graph.log 2>&1
echo "== check graph rc=$? at $(el) s: $(grep -E '^# check' $L/check-graph.log)" >> $S
for r in 1 2; do for v in new old; do
  b=build-gpu/moebench; [ $v = old ] && b=/tmp/build-old/moebench
  timeout 100 $b run --backend cuda --config bench/qwen3_30b_a3b --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=4 --set roofline=false --set graph=true --steps 50 --warmup 5 --out $L/qw-$v-$r.json > $L/qw-$v-$r.log 2>&1
  echo "== qw graph $v $r rc=$? at $(el) s: $(grep -E '^  (step|combine_bwd) ' $L/qw-$v-$r.log | awk '{print $1, $2}' | tr '\n' ' ')" >> $S
done; done
# The review mends: plan counts as before (auto 18 heuristic queries in 20 timed steps, tuned 0).
for a in auto tuned; do
  timeout 90 /tmp/build-old/moebench run --backend cuda --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=lt_multistream --set precision=fp8_tensor --set fp8_weights=cached --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=4 --set roofline=false --set gemm.algo=$a --warmup 5 --out $L/plans-$a.json > $L/plans-$a.log 2>&1
  echo "== plans $a rc=$? at $(el) s: $(grep -E 'heuristic queries' $L/plans-$a.log | sed 's/.*; \([0-9]* plans\)/\1/')" >> $S
done
# Issue 16's quantization kernel under ncu's full set with its SASS source view (one Mixtral-8x7B
# fp8_tensor step at 4096 tokens), and every kernel of one Qwen3-30B-A3B step (issue 15's list).
timeout 200 $NCU --clock-control none --profile-from-start off -k regex:quantize_tiles --set full --import-source yes -c 8 -o $OUT/quant -f build-gpu/moebench run --backend cuda --config bench/mixtral_8x7b --set precision=fp8_tensor --set fp8_weights=cached --set gemm.method=lt_multistream --set expert_grad_dtype=bf16 --set align=16 --set check=off --set roofline=false --set warmup_s=0 --steps 1 --warmup 1 --profile > $L/ncu-quant.log 2>&1
echo "== ncu quant rc=$? at $(el) s" >> $S
$NCU -i $OUT/quant.ncu-rep --page source --csv --print-source sass > $OUT/quant-sass.csv 2> $L/quant-sass.err
echo "== quant sass rc=$? lines $(wc -l < $OUT/quant-sass.csv)" >> $S
$NCU -i $OUT/quant.ncu-rep --page details --print-details all > $OUT/quant-details.txt 2>&1
echo "== quant details rc=$? lines $(wc -l < $OUT/quant-details.txt)" >> $S
timeout 150 $NCU --clock-control none --profile-from-start off --metrics gpu__time_duration.sum,dram__bytes.sum build-gpu/moebench run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set expert_grad_dtype=bf16 --set gemm.method=grouped_sm90 --set check=off --set roofline=false --set warmup_s=0 --steps 1 --warmup 1 --profile > $L/ncu-qw-all.log 2>&1
echo "== ncu qwen3 all kernels rc=$? at $(el) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
