#!/usr/bin/env bash
# Session 25, call 2 (one H100): ncu at the GPU's own clocks (--clock-control none) on DeepSeek-V3's
# EP 2 GEMM shapes: sections of the weight gradients (bf16) and of all six fp8_block GEMMs; the
# source page's stall samples of fp8_block's up projection and of bf16's and fp8_block's wgrad_in.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j16 --target moebench > $L/build.log 2>&1; echo "build rc=$? at $(el) s" >> $S
G="build-gpu/moebench gemm --config configs/bench/deepseek_v3.json --ep 2 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_block --methods grouped_sm90 --iters 1"
$G > $L/gemm.log 2>&1; grep -E '^  (up|down|dgrad|wgrad)' $L/gemm.log >> $S
N="ncu --clock-control none"
timeout 150 $N --kernel-name regex:grouped_gemm_kernel --launch-skip 12 --launch-count 24 --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --csv --page details $G > $L/ncu_sections.csv 2> $L/ncu_sections_err.txt
echo "== ncu sections rc=$? at $(el) s" >> $S
python3 - $L/ncu_sections.csv >> $S <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ix = {k: i for i, k in enumerate(h)}
want = ['Duration', 'SM Frequency', 'Compute (SM) Throughput', 'L1/TEX Cache Throughput', 'L2 Cache Throughput', 'DRAM Throughput', 'Mem Busy', 'Mem Pipes Busy', 'L2 Hit Rate', 'Registers Per Thread', 'Dynamic Shared Memory Per Block']
out = {}
for r in rows[1:]:
    key = (int(r[ix['ID']]), r[ix['Kernel Name']][:100])
    out.setdefault(key, {})[r[ix['Metric Name']]] = r[ix['Metric Value']]
for (i, name), m in sorted(out.items()):
    print(i, name, '\n   ' + '; '.join(f'{k} {m[k]}' for k in want if k in m))
PY
timeout 120 $N --kernel-name regex:grouped_gemm_kernel --launch-skip 18 --launch-count 1 --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum $G > $L/ncu_metrics.txt 2>&1
echo "== ncu metrics (FP8 up) rc=$? at $(el) s" >> $S; grep -E '^\s+(sm__|l1tex|lts|dram|gpu__)' $L/ncu_metrics.txt >> $S
src() {  # tag skip
  timeout 150 $N --kernel-name regex:grouped_gemm_kernel --launch-skip $2 --launch-count 1 --section WarpStateStats --section SourceCounters --page source --print-source sass --csv $G > $L/src-$1.csv 2> $L/src-$1-err.txt
  echo "== source $1 (grouped launch $2) rc=$? at $(el) s" >> $S
  python3 devrun/ncu_src_sum.py $L/src-$1.csv 36 >> $S 2>&1
  gzip -f $L/src-$1.csv
}
src fp8-up 18
src bf16-wgrad_in 15
src fp8-wgrad_in 33
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
