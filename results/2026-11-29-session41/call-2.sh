#!/usr/bin/env bash
# Session 41, call 2 (one H200). (1) Call 1 read the Qwen3-30B-A3B graph step 2.76 ms with the
# review's mends against 2.70 without (experts phases 2% slower), though neither diff touches the
# GEMM's main loop: both builds again, the grouped GEMM's SASS compared, and the step alternated
# three rounds, old first this time. (2) Issue 16's quantization kernel: dh's launch (both
# orientations, Mixtral-8x7B fp8_tensor at 4096 tokens) under ncu's source counters, condensed
# on the device (devrun/sass_top.py), and its SASS.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
R=results/2026-11-29-session40
D=build-gpu/CMakeFiles/moe_cuda.dir/kernels/cuda
git apply $R/review-shared-helpers.diff $R/review-ep1-counts.diff && echo "applied" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build new rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-new; cp $D/grouped_gemm.cu.o /tmp/gg-new.o
git apply -R $R/review-shared-helpers.diff $R/review-ep1-counts.diff && echo "reversed" >> $S
cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build-old.log 2>&1
echo "build old rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-old; cp $D/grouped_gemm.cu.o /tmp/gg-old.o
for v in new old; do /usr/local/cuda/bin/cuobjdump -sass /tmp/gg-$v.o | sed -E 's@/\*[0-9a-f]{4,}\*/@@g; s/ +/ /g' > /tmp/gg-$v.sass; done
echo "grouped GEMM SASS lines new $(wc -l < /tmp/gg-new.sass) old $(wc -l < /tmp/gg-old.sass); differing lines $(diff /tmp/gg-new.sass /tmp/gg-old.sass | grep -c '^[<>]')" >> $S
diff /tmp/gg-new.sass /tmp/gg-old.sass | head -60 > $L/gg-sass-diff.txt
for r in 1 2 3; do for v in old new; do
  timeout 100 /tmp/mb-$v run --backend cuda --config bench/qwen3_30b_a3b --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=4 --set roofline=false --set graph=true --steps 50 --warmup 5 > $L/qw-$v-$r.log 2>&1
  echo "== qw graph $v $r rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/qw-$v-$r.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/qw-$v-$r.log)" >> $S
done; done
NCU=/usr/local/cuda/bin/ncu
timeout 200 $NCU --clock-control none --profile-from-start off -k regex:quantize_tiles --launch-skip 3 -c 1 --section SourceCounters --section WarpStateStats --section LaunchStats --section Occupancy --section SpeedOfLight --import-source yes -o $OUT/quant -f /tmp/mb-old run --backend cuda --config bench/mixtral_8x7b --set precision=fp8_tensor --set fp8_weights=cached --set gemm.method=lt_multistream --set expert_grad_dtype=bf16 --set align=16 --set check=off --set roofline=false --set warmup_s=0 --steps 1 --warmup 1 --profile > $L/ncu-quant.log 2>&1
echo "== ncu quant rc=$? at $(el) s" >> $S
$NCU -i $OUT/quant.ncu-rep --page source --csv --print-source sass > /tmp/quant-sass.csv 2> $L/quant-sass.err
python3 devrun/sass_top.py /tmp/quant-sass.csv > $L/quant-sass-top.txt 2>&1
echo "== sass top rc=$?" >> $S
gzip -c /tmp/quant-sass.csv > $OUT/quant-sass.csv.gz
$NCU -i $OUT/quant.ncu-rep --page details > $L/quant-details.txt 2>&1
rm -f $OUT/quant.ncu-rep
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
