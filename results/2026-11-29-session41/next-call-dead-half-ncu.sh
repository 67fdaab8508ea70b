#!/usr/bin/env bash
# Prepared for a later session (one H200; not run): why grouped-dead-half.diff (call 5b) made
# DeepSeek-V3's EP 2 row GEMMs 3-7% slower. Hypothesis (README, call 5): the last M tile of an
# expert, its MMAs halved, runs ahead of the sibling tiles that share its weight column block, and
# they then read the weights from DRAM instead of L2. Under ncu at base clocks, the grouped
# kernel's launches of `moebench gemm --rows routed` on DeepSeek-V3's EP 2 shapes, with and
# without the diff, and with gemm.sm90_cluster 2 (the pair's multicast keeps the tiles in step):
# duration, DRAM bytes read, tensor pipe activity per GEMM. The hypothesis holds if the diff's
# DRAM reads grow on the row GEMMs without clusters and not with them.
# Copy to devrun/ and run from the repository root with BUILD_COMMIT ("<commit> 1") carried.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
R=results/2026-11-29-session41
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build-old.log 2>&1
echo "build old rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-old
git apply $R/grouped-dead-half.diff; echo "apply rc=$?" >> $S
cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build-new.log 2>&1
echo "build new rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-new
git apply -R $R/grouped-dead-half.diff; echo "reverse rc=$?" >> $S
NCU=/usr/local/cuda/bin/ncu
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for cl in 1 2; do for v in old new; do
  timeout 240 $NCU --clock-control base --csv -k regex:grouped_gemm_kernel --metrics $M /tmp/mb-$v gemm --config configs/bench/deepseek_v3.json --ep 2 --rows routed --set align=16 --set expert_grad_dtype=bf16 --set gemm.sm90_cluster=$cl --methods grouped_sm90 --iters 2 > $L/ncu-cl$cl-$v.csv 2> $L/ncu-cl$cl-$v.err
  echo "== ncu cluster $cl $v rc=$? at $(el) s" >> $S
  python3 - $L/ncu-cl$cl-$v.csv >> $S 2>&1 <<'PY'
import csv, sys, collections, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; K = h.index('Kernel Name'); N = h.index('Metric Name'); V = h.index('Metric Value'); I = h.index('ID')
per = collections.defaultdict(dict)
for r in rows[1:]:
    per[(r[I], r[K])][r[N]] = float(r[V].replace(',', ''))
# Every launch in order (a GEMM's warm-up and timed calls run back to back: up, down, dgrad_a,
# dgrad_x, wgrad_out, wgrad_in), its layout and its metrics.
for (i, k), m in sorted(per.items(), key=lambda x: int(x[0][0])):
    lay = (re.findall(r'GroupedLayout\)(\d)', k) or ['?'])[0]
    print(f'  {i:>4} layout {lay}', ' '.join(f"{n.split('__')[1][:14]}={v:.4g}" for n, v in m.items()))
PY
done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
