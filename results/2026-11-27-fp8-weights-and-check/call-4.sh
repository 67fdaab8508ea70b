#!/usr/bin/env bash
# Session 22, call 4 (1 GPU): where an FP8 step's expert time goes, kernel by kernel (ncu, one
# step, fp8_weights cached so the weights' quantization is not in it), against bf16's, on
# Qwen3-30B-A3B (fp8_block, grouped_sm90) and Mixtral-8x7B (fp8_tensor, lt_multistream), EP 1.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60 --set align=16"
summ() { python3 - $1 <<'PY'
import csv, collections, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[0].isdigit()]
agg = collections.defaultdict(lambda: [0, 0.0])
for r in rows:
    name = r[4].split('(')[0].replace('void ', '')[:90]
    agg[name][0] += 1; agg[name][1] += float(r[14].replace(',', ''))
for k, v in sorted(agg.items(), key=lambda x: -x[1][1])[:22]:
    print(f"  {v[1]/1000:8.1f} us {v[0]:3d}x  {k}")
print(f"  total {sum(v[1] for v in agg.values())/1000:.1f} us")
PY
}
for spec in "qwen3_30b_a3b 4096 grouped_sm90 fp8_block" "mixtral_8x7b 8192 lt_multistream fp8_tensor" "deepseek_v3 4096 grouped_sm90 fp8_block"; do
  set -- $spec
  for v in bf16 fp8; do
    [ $(el) -gt 500 ] && continue
    P=""; [ $v = fp8 ] && P="--set precision=$4 --set fp8_weights=cached"
    n=ncu-$1-$v
    timeout 150 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
      build-gpu/moebench run --config configs/bench/$1.json $COMMON --set tokens_per_rank=$2 --set gemm.method=$3 $P --steps 1 --warmup 3 --profile > $L/$n.csv 2> $L/$n.err
    echo "== $n rc=$? at $(el) s" >> $S
    summ $L/$n.csv >> $S
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
