#!/usr/bin/env bash
# Session 17, call 7 (one H200): where our grouped kernel's bf16 weight gradient waits on
# DeepSeek-V3's EP 1 shapes (256 experts x 128 rows; wgrad_in M 7168, N 4096, K 128 per expert):
# ncu's speed-of-light and memory sections, and the source page's warp stall samples per SASS
# instruction.
set -uo pipefail
mkdir -p $OUT
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 --target moebench > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
G="build-gpu/moebench gemm --config configs/bench/deepseek_v3.json --ep 1 --set tokens_per_rank=4096 --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 1"
timeout 100 $G > $OUT/gemm.txt 2>&1; echo "gemm rc=$?" >> $S; grep -E "^  (up|down|dgrad|wgrad|dense)" $OUT/gemm.txt >> $S
# Launches of the kernel: 3 per GEMM (2 untimed, 1 timed) in the order up, down, dgrad_a, dgrad_x,
# wgrad_out, wgrad_in: the 17th is wgrad_in's second.
K="--kernel-name regex:grouped_gemm_kernel --launch-skip 16 --launch-count 1"
timeout 200 ncu $K --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --csv $G > $OUT/ncu_sol.csv 2> $OUT/ncu_sol_err.txt; echo "ncu sol rc=$?" >> $S
grep -E "Duration|Throughput|DRAM|L2|Registers|Shared Memory|Block Size|Grid Size|Compute \(SM\)|Function" $OUT/ncu_sol.csv | cut -c1-300 | head -40 >> $S
timeout 250 ncu $K --section WarpStateStats --section SourceCounters --page source --print-source sass --csv $G > $OUT/ncu_src.csv 2> $OUT/ncu_src_err.txt; echo "ncu src rc=$?" >> $S
wc -l $OUT/ncu_src.csv >> $S
gzip -f $OUT/ncu_src.csv
cat $S
