#!/usr/bin/env bash
# Session 42, call 5 (the machine of call 4, main's build in /tmp/mb-old): where Qwen3-30B-A3B's
# bf16 weight gradients wait. ncu source counters of one wgrad_in launch (launch 15 of the grouped
# kernel in `moebench gemm --iters 1`) and one wgrad_out (12), condensed by sass_top.py.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
ls -la /tmp/mb-old >> $S 2>&1 || exit 1
NCU=/usr/local/cuda/bin/ncu
for k in 15:wgrad_in 12:wgrad_out; do
  n=${k%%:*}; name=${k##*:}
  [ $(el) -gt 200 ] && break
  timeout 150 $NCU --clock-control none -k regex:grouped_gemm_kernel --launch-skip $n -c 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis --import-source yes -o $OUT/$name -f /tmp/mb-old gemm --config bench/qwen3_30b_a3b --rows routed --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 1 > $L/ncu-$name.log 2>&1
  echo "== ncu $name rc=$? at $(el) s" >> $S
  $NCU -i $OUT/$name.ncu-rep --page source --csv --print-source sass > /tmp/$name-sass.csv 2> $L/$name-sass.err
  python3 devrun/sass_top.py /tmp/$name-sass.csv > $L/$name-sass-top.txt 2>&1
  $NCU -i $OUT/$name.ncu-rep --page details > $L/$name-details.txt 2>&1
  head -60 $L/$name-sass-top.txt >> $S
  grep -E 'Duration|Stall|Warp Cycles|Throughput|Issued' $L/$name-details.txt | head -30 >> $S
  rm -f $OUT/$name.ncu-rep
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
