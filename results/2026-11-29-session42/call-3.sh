#!/usr/bin/env bash
# Session 42, call 3 (one H200). (1) Session 41's review mends: the FP8 quantization tests' shared
# setup in one helper (tests/cuda/test_fp8_quantize_cuda.cu) and the alltoall dispatcher's counts
# at ep 1 without the unused received array (dispatch/alltoall.cpp; the GPU test
# BufferPlanCuda.EstimateIsWhatTheStepAllocates holds the estimate to the allocations): every GPU
# test, checks at ep 1 through both of alltoall's ep-1 paths (align 16 and 1). (2) Qwen3-30B-A3B's
# expert GEMMs under ncu (routed rows): is the weight gradient, whose output is 805 MB a call at
# K = 256 rows, bound by its stores, its MMAs, or their sum? (3) session 41's dead-half question
# (next-call-dead-half-ncu.sh, as prepared), time permitting.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-old
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Failure|Expected|Which is' $L/tests.log | head -20 >> $S
grep -E 'EstimateIsWhatTheStepAllocates|Fp8QuantizeCuda' $L/tests.log | grep -E 'OK|FAILED' >> $S
for a in 16 1; do
  timeout 120 /tmp/mb-old run --backend cuda --config bench/qwen3_30b_a3b --set dispatch=alltoall --set align=$a --set check=first --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 > $L/check-qw-align$a.log 2>&1
  echo "== check qwen3 alltoall align $a rc=$? at $(el) s: $(grep -E '^# check' $L/check-qw-align$a.log) $(grep -E '^# memory' $L/check-qw-align$a.log | cut -c1-80)" >> $S
done
timeout 150 /tmp/mb-old run --backend cuda --config bench/deepseek_v3 --set tokens_per_rank=1024 --set dispatch=alltoall --set align=16 --set check=first --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 > $L/check-ds.log 2>&1
echo "== check deepseek 1024 alltoall rc=$? at $(el) s: $(grep -E '^# check' $L/check-ds.log)" >> $S
NCU=/usr/local/cuda/bin/ncu
MQ=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second
for g in bf16 fp32; do
  timeout 150 $NCU --clock-control none --csv -k regex:grouped_gemm_kernel --metrics $MQ /tmp/mb-old gemm --config bench/qwen3_30b_a3b --rows routed --set align=16 --set expert_grad_dtype=$g --methods grouped_sm90 --iters 1 > $L/ncu-qw-$g.csv 2> $L/ncu-qw-$g.err
  echo "== ncu qwen3 grads $g rc=$? at $(el) s" >> $S
  python3 - $L/ncu-qw-$g.csv >> $S 2>&1 <<'PY'
import csv, sys, collections, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; K = h.index('Kernel Name'); N = h.index('Metric Name'); V = h.index('Metric Value'); I = h.index('ID')
per = collections.defaultdict(dict)
for r in rows[1:]:
    per[(r[I], r[K])][r[N]] = float(r[V].replace(',', ''))
for (i, k), m in sorted(per.items(), key=lambda x: int(x[0][0])):
    lay = (re.findall(r'GroupedLayout\)(\d)', k) or ['?'])[0]
    us = m.get('gpu__time_duration.sum', 0) / 1e3
    rd = m.get('dram__bytes_read.sum', 0) / 1e6; wr = m.get('dram__bytes_write.sum', 0) / 1e6
    print(f'  {i:>4} layout {lay} {us:8.1f} us  read {rd:7.1f} MB  write {wr:7.1f} MB  '
          f'dram {m.get("dram__throughput.avg.pct_of_peak_sustained_elapsed", 0):5.1f}%  '
          f'tensor {m.get("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed", 0):5.1f}%  '
          f'{m.get("sm__cycles_elapsed.avg.per_second", 0) / 1e6:6.0f} MHz')
PY
done
R=results/2026-11-29-session41
[ $(el) -lt 330 ] || { echo "no time for the dead-half ncu" >> $S; cd $OUT && tar czf logs.tgz logs && rm -rf logs; cat $S; exit 0; }
git apply $R/grouped-dead-half.diff; echo "apply dead-half rc=$?" >> $S
cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build-new.log 2>&1
echo "build dead-half rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-new
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for cl in 1 2; do for v in old new; do
  [ $(el) -gt 540 ] && break 2
  timeout 100 $NCU --clock-control base --csv -k regex:grouped_gemm_kernel --metrics $M /tmp/mb-$v gemm --config bench/deepseek_v3 --ep 2 --rows routed --set align=16 --set expert_grad_dtype=bf16 --set gemm.sm90_cluster=$cl --methods grouped_sm90 --iters 1 > $L/ncu-cl$cl-$v.csv 2> $L/ncu-cl$cl-$v.err
  echo "== ncu dead-half cluster $cl $v rc=$? at $(el) s" >> $S
  python3 - $L/ncu-cl$cl-$v.csv >> $S 2>&1 <<'PY'
import csv, sys, collections, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; K = h.index('Kernel Name'); N = h.index('Metric Name'); V = h.index('Metric Value'); I = h.index('ID')
per = collections.defaultdict(dict)
for r in rows[1:]:
    per[(r[I], r[K])][r[N]] = float(r[V].replace(',', ''))
for (i, k), m in sorted(per.items(), key=lambda x: int(x[0][0])):
    lay = (re.findall(r'GroupedLayout\)(\d)', k) or ['?'])[0]
    print(f'  {i:>4} layout {lay}', ' '.join(f"{n.split('__')[1][:14]}={v:.4g}" for n, v in m.items()))
PY
done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
