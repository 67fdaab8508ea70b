#!/usr/bin/env bash
# Session 14, call 3 (one H200): the tree (FP8 mainloop in chunks of 4/2/1 stages, K stages no
# longer rounded to pairs) against HEAD: all GPU tests, tiny FP8 checks, the Qwen3-30B-A3B check
# on the grouped kernel, moebench gemm FP8 of both builds in turn (twice) on the three workloads.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs old
S="$OUT/summary.txt"
tar xzf devrun/old.tgz -C old
B() { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake-$1.log 2>&1 && cmake --build build-gpu -j8 > /tmp/build-$1.log 2>&1; }
B tree & (cd old && B old) &
wait
for d in . old; do [ -x $d/build-gpu/moebench ] || { echo "build $d failed"; grep -B2 -A10 error /tmp/build-*.log | head -30; exit 1; }; done
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception" $OUT/logs/gpu_tests.txt | head -20 >> $S
grep -E "largest error" $OUT/logs/gpu_tests.txt | sort | uniq -c | head -20 >> $S
for p in fp8_tensor:grouped_sm90 fp8_tensor:auto fp8_block:auto; do
  IFS=: read pr m <<< "$p"
  timeout 60 build-gpu/moebench run --config configs/tiny.json --backend cuda --set precision=$pr --set align=16 --set gemm.method=$m --steps 3 > $OUT/logs/tiny_${pr}_$m.log 2>&1; echo "== tiny $pr $m rc=$?" >> $S
  grep -E "^  (out|dx|dw_in|dw_out) |^# check|runs .* instead|expert GEMMs:" $OUT/logs/tiny_${pr}_$m.log | head -8 >> $S
done
timeout 200 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --backend cuda --set precision=fp8_tensor --set tokens_per_rank=256 --set gemm.method=grouped_sm90 --set align=16 --set check=first --steps 2 --warmup 1 -o $OUT/logs/qwen3_check.json > $OUT/logs/qwen3_check.log 2>&1; echo "== qwen3 check fp8_tensor grouped_sm90 rc=$?" >> $S
grep -E "^  [a-z_]+ +[0-9].*(PASS|FAIL)|^# check|expert GEMMs:" $OUT/logs/qwen3_check.log >> $S
echo "at $(( $(date +%s) - START )) s" >> $S
for c in mixtral_8x7b deepseek_v3 qwen3_30b_a3b; do
  T=8192; [ $c = deepseek_v3 ] && T=4096
  for b in old . old .; do
    echo "== gemm $c $b" >> $S
    timeout 80 $b/build-gpu/moebench gemm --config configs/bench/$c.json --ep 1 --set tokens_per_rank=$T --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods grouped_sm90,lt_multistream --iters 10 > $OUT/logs/g.log 2>&1; grep -E "fp8_tensor:|dense" $OUT/logs/g.log | cut -c1-100 >> $S
  done
done
echo "at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
