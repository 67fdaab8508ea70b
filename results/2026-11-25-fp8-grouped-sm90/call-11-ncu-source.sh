#!/usr/bin/env bash
# Session 13, call 11 (one H200): where the FP8 grouped kernel's warps wait, per SASS instruction
# (ncu source page, warp stall samples), on Mixtral-8x7B's up projection.
set -uo pipefail
mkdir -p $OUT
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 --target moebench > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
G="build-gpu/moebench gemm --config configs/bench/mixtral_8x7b.json --ep 1 --set tokens_per_rank=8192 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods grouped_sm90 --iters 1"
timeout 300 ncu --kernel-name-base mangled --kernel-name regex:e4m3 --launch-count 1 --section WarpStateStats --section SourceCounters --page source --print-source sass --csv $G > $OUT/ncu_src.csv 2> $OUT/ncu_err.txt; echo "ncu rc=$?" >> $S
wc -l $OUT/ncu_src.csv >> $S
head -3 $OUT/ncu_src.csv | cut -c1-600 >> $S
gzip -f $OUT/ncu_src.csv
cat $S
