#!/usr/bin/env bash
# Call 1b (same machine as call 1): call 1's "old" binary was stale (ninja saw the copied tree's
# fp8_quantize.cu older than the plan-b3 object), so the old rows are redone here: rebuild old with
# the file touched, ncu old both recipes, then Mixtral fp8_tensor steps old / b2:3 / b3:2 / b2:2r alternating.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
ls -la /tmp/mb-b2 /tmp/mb-b3 >> $S 2>&1
touch kernels/cuda/fp8_quantize.cu
cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build-old.log 2>&1
echo "build old rc=$? at $(el) s: $(grep -c fp8_quantize $L/build-old.log) lines name fp8_quantize" >> $S
cp build-gpu/moebench /tmp/mb-old
NCU=/usr/local/cuda/bin/ncu
MX="run --backend cuda --config bench/mixtral_8x7b --set fp8_weights=cached --set gemm.method=lt_multistream --set expert_grad_dtype=bf16 --set align=16 --set check=off --set roofline=false --set warmup_s=0 --steps 1 --warmup 1 --profile"
for prec in fp8_tensor fp8_block; do
  timeout 100 $NCU --clock-control none --profile-from-start off -k regex:quantize_tiles --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed /tmp/mb-old $MX --set precision=$prec > $L/ncu-$prec-old.log 2>&1
  echo "== ncu $prec old rc=$? at $(el) s: us $(grep -E 'gpu__time_duration' $L/ncu-$prec-old.log | awk '{print $NF}' | tr '\n' ' ')| dram% $(grep -E 'dram__throughput' $L/ncu-$prec-old.log | awk '{print $NF}' | tr '\n' ' ')" >> $S
done
for r in 1 2 3; do for v in old b2:2r b3:2 b2:3; do
  [ $(el) -gt 500 ] && break 2
  b=${v%%:*}; plan=${v##*:}; bin=/tmp/mb-$b; [ $v = old ] && bin=/tmp/mb-old
  MOE_EXP_QUANT_PLAN=$plan timeout 60 $bin run --backend cuda --config bench/mixtral_8x7b --set precision=fp8_tensor --set fp8_weights=cached --set expert_grad_dtype=bf16 --set align=16 --set check=off --set roofline=false --set warmup_s=4 --steps 30 --warmup 5 > $L/mx-${v/:/-}-$r.log 2>&1
  echo "== mx fp8_tensor $v $r rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/mx-${v/:/-}-$r.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/mx-${v/:/-}-$r.log)" >> $S
done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
