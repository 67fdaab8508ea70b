#!/usr/bin/env bash
# Session 13, call 3 (one H200): ncu of the FP8 grouped kernel on Mixtral-8x7B's up projection
# (and the bf16 kernel on the same shape for comparison).
set -uo pipefail
mkdir -p $OUT
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 --target moebench > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
G="build-gpu/moebench gemm --config configs/bench/mixtral_8x7b.json --ep 1 --set tokens_per_rank=8192 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods grouped_sm90 --iters 1"
timeout 200 ncu --kernel-name-base mangled --kernel-name regex:e4m3 --launch-count 1 --set full --print-details all $G > $OUT/ncu_fp8_up.txt 2>&1; echo "ncu fp8 rc=$?" >> $S
timeout 200 ncu --kernel-name-base mangled --kernel-name regex:grouped_gemm_kernel --launch-count 1 --set full $G > $OUT/ncu_bf16_up.txt 2>&1; echo "ncu bf16 rc=$?" >> $S
for f in $OUT/ncu_fp8_up.txt $OUT/ncu_bf16_up.txt; do
  echo "== $f" >> $S
  grep -E "^  [a-z_]+.*\(|Duration|SM Busy|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|L1/TEX Cache Throughput|Issue Slots Busy|Executed Ipc A|Registers Per|Achieved Occupancy|Shared Memory Configuration|Stall|stall" $f | head -40 >> $S
done
gzip -f $OUT/ncu_fp8_up.txt $OUT/ncu_bf16_up.txt
cat $S
