#!/usr/bin/env bash
# Session 13, call 7 (one H200): the FP8 check of bench workloads with fp8_tensor's forward and
# data gradients on the grouped sm90 kernel (float64 CPU reference).
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 --target moebench > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built at $(( $(date +%s) - START )) s" >> $S
chk() { n=$1; shift 1; [ $(( $(date +%s) - START )) -gt 420 ] && { echo "$n skipped (deadline)" >> $S; return; }
  timeout 300 build-gpu/moebench run "$@" --backend cuda --set align=16 --set check=first --steps 2 --warmup 1 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$? at $(( $(date +%s) - START )) s" >> $S; grep -E "^  [a-z_]+ +[0-9].*(PASS|FAIL)|^# check|runs .* instead|expert GEMMs:" $OUT/logs/$n.log >> $S; }
chk qwen3_fp8_tensor_sm90 --config configs/bench/qwen3_30b_a3b.json --set precision=fp8_tensor --set tokens_per_rank=256 --set gemm.method=grouped_sm90
chk mixtral_fp8_tensor_sm90 --config configs/bench/mixtral_8x7b.json --set precision=fp8_tensor --set tokens_per_rank=128 --set gemm.method=grouped_sm90
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
