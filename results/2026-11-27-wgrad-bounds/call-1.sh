#!/usr/bin/env bash
# Session 21, call 1 (1 GPU): (1) the three small kernel changes left unrun last session: GPU
# tests of the router, router_grads and dispatch layouts; per-kernel ncu durations on DeepSeek-V3
# EP 1 (base figures: last session's call 7 on an H100). (2) Our grouped kernel's weight gradients
# at DeepSeek-V3's EP 2 shapes with gemm.sm90_cluster 1 and 2 (alternating), and ncu's L2 / DRAM
# bytes and tensor-pipe activity for each GEMM of both.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
timeout 120 build-gpu/tests/moe_cuda_tests --gtest_filter='Router*:DispatchCuda*:Dedup*' > $L/tests.log 2>&1
echo "tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED) ' $L/tests.log | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED" $L/tests.log >> $S
COMMON="--backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60"
timeout 150 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
  --kernel-name regex:"router_stats_final|split_bf16x3|repeat_cols|sum_terms|layout_position" \
  $B run --config configs/bench/deepseek_v3.json $COMMON --steps 1 --warmup 3 --profile > $L/ncu-router.csv 2> $L/ncu-router.err
echo "== ncu router rc=$? at $(el) s" >> $S
grep -E "gpu__time_duration" $L/ncu-router.csv | awk -F'","' '{print $5, $NF}' | sed 's/(.*)//' | cut -c1-120 >> $S
G="$B gemm --config configs/bench/deepseek_v3.json --ep 2 --set expert_grad_dtype=bf16 --methods grouped_sm90"
for r in 1 2; do
  for c in 1 2; do
    timeout 100 $G --iters 20 --set gemm.sm90_cluster=$c > $L/gemm-c$c-r$r.txt 2>&1
    echo "== gemm cluster $c round $r rc=$? at $(el) s" >> $S
    grep -E "^  (up|down|dgrad|wgrad|dense)" $L/gemm-c$c-r$r.txt >> $S
  done
done
M=gpu__time_duration.sum,lts__t_bytes.sum,lts__t_bytes.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second
for c in 1 2; do
  [ $(el) -gt 480 ] && continue
  timeout 120 /usr/local/cuda/bin/ncu --clock-control none --metrics $M --csv --kernel-name regex:grouped_gemm_kernel \
    $G --iters 1 --set gemm.sm90_cluster=$c > $L/ncu-gemm-c$c.csv 2> $L/ncu-gemm-c$c.err
  echo "== ncu gemm cluster $c rc=$? at $(el) s" >> $S
  python3 - $L/ncu-gemm-c$c.csv >> $S <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[0].isdigit()]
by = {}
for r in rows:
    by.setdefault(int(r[0]), {})[r[12]] = (r[13], r[14])
for i in sorted(by):
    m = by[i]
    print(i, " ".join(f"{k.split('.')[0].replace('__','_')}{'/s' if 'per_second' in k else ''}={v}{u}" for k, (u, v) in [(k, m[k]) for k in m]))
PY
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
