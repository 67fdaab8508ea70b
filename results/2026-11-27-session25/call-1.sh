#!/usr/bin/env bash
# Session 25, call 1 (one H100): (a) what an H100 writes at best, as a weight gradient's bytes
# (devrun/wprobe.cu: memset, linear and tile-pattern stores); (b) where the 256-column FP8 GEMMs
# wait: ncu sections on the twelve grouped launches of DeepSeek-V3's EP 2 shapes (bf16 then
# fp8_block), and the source page's warp stall samples of the FP8 up projection.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >> $S
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j14 --target moebench > $L/build.log 2>&1; echo "build rc=$? at $(el) s" >> $S ) &
nvcc -O2 -arch=sm_90a -o /tmp/wprobe devrun/wprobe.cu > $L/wprobe-build.txt 2>&1 && /tmp/wprobe > $L/wprobe.txt 2>&1
echo "== write probe (7.5 GB, median of 7) at $(el) s" >> $S
cat $L/wprobe.txt >> $S
wait
G="build-gpu/moebench gemm --config configs/bench/deepseek_v3.json --ep 2 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_block --methods grouped_sm90 --iters 1"
timeout 200 ncu --kernel-name regex:grouped_gemm_kernel --launch-count 12 --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy --csv --page details $G > $L/ncu_sections.csv 2> $L/ncu_sections_err.txt
echo "== ncu sections rc=$? at $(el) s" >> $S
python3 - $L/ncu_sections.csv >> $S <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ix = {k: i for i, k in enumerate(h)}
want = ['Duration', 'Compute (SM) Throughput', 'Memory Throughput', 'L1/TEX Cache Throughput', 'L2 Cache Throughput', 'DRAM Throughput', 'Registers Per Thread', 'Executed Ipc Active', 'Issue Slots Busy', 'SM Busy', 'Mem Busy', 'Max Bandwidth', 'Mem Pipes Busy', 'L1/TEX Hit Rate', 'L2 Hit Rate', 'Shared Memory Configuration Size']
cur = None; out = {}
for r in rows[1:]:
    key = (r[ix['ID']], r[ix['Kernel Name']][:90])
    out.setdefault(key, {})[r[ix['Metric Name']]] = r[ix['Metric Value']] + ' ' + r[ix['Metric Unit']]
for (i, name), m in out.items():
    print(i, name)
    print('   ' + '; '.join(f'{k} {m[k]}' for k in want if k in m))
PY
timeout 200 ncu --kernel-name regex:'grouped_gemm_kernel.*e4m3' --launch-count 1 --section WarpStateStats --section SourceCounters --page source --print-source sass --csv $G > $L/ncu_src.csv 2> $L/ncu_src_err.txt
echo "== ncu source (first FP8 grouped launch) rc=$? at $(el) s" >> $S
python3 devrun/ncu_src_sum.py $L/ncu_src.csv 40 >> $S 2>&1
gzip -f $L/ncu_src.csv
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
