#!/usr/bin/env bash
# Session 37, call 2 (one H200): call 1 again for the reference-ties diff, its sources touched so
# that ninja rebuilds them (call 1's "diff" build was the kept main objects); then Nsight
# Compute's full sections on the FP8 quantization kernel (dh, both ways) and SwiGLU's forward in
# a Mixtral-8x7B fp8_tensor step; then the quantization kernel with 3 blocks an SM against 2.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
build() {
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build-$1.log 2>&1
  echo "build $1 rc=$? at $(el) s, $(grep -c 'Building' $L/build-$1.log) objects: $(grep -o 'core/[a-z_]*\.cpp' $L/build-$1.log | sort -u | tr '\n' ' ')" >> $S
}
B=build-gpu/moebench
chk() {  # tag name tmo [more]
  local tag=$1 n=$2 tmo=$3; shift 3
  timeout $tmo $B run --backend cuda --set align=16 --set roofline=false --set warmup_s=0 --set fp8_weights=cached --set check=first --steps 1 --warmup 1 "$@" --out $L/$n-$tag.json > $L/$n-$tag.log 2>&1
  echo "== $n $tag rc=$? at $(el) s: $(grep -E '^# (check|fp8 scales)' $L/$n-$tag.log | tr '\n' ' ') ref_s $(grep -o '"reference_seconds": [0-9.]*' $L/$n-$tag.json | tr '\n' ' ')" >> $S
  sed -n '/^# tensor/,/^# check/p' $L/$n-$tag.log > $L/$n-$tag.fig
}
checks() {
  chk $1 qw-t 90 --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set precision=fp8_tensor
  chk $1 qw-b 90 --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set precision=fp8_block
  chk $1 mx-t 150 --config bench/mixtral_8x7b --set tokens_per_rank=4096 --set gemm.method=lt_multistream --set precision=fp8_tensor
}
grep -c "ScaleTies::quantized\|struct ScaleTies" core/reference.cpp >> $S
touch core/reference.cpp core/parallel.h
build diff
checks diff
git apply -R results/2026-11-28-session36/reference-ties-one-place.diff 2>>$S || patch -R -p1 < results/2026-11-28-session36/reference-ties-one-place.diff >> $S 2>&1
grep -c "ScaleTies::quantized" core/reference.cpp >> $S
touch core/reference.cpp core/parallel.h
build main
checks main
for n in qw-t qw-b mx-t; do
  if cmp -s $L/$n-diff.fig $L/$n-main.fig && [ -s $L/$n-main.fig ]; then echo "$n figures: equal" >> $S; else echo "$n figures: DIFFER" >> $S; diff $L/$n-diff.fig $L/$n-main.fig >> $S; fi
done
STEP="run --backend cuda --config bench/mixtral_8x7b --set gemm.method=lt_multistream --set precision=fp8_tensor --set fp8_weights=cached --set expert_grad_dtype=bf16 --set align=16 --set roofline=false --set warmup_s=0 --set check=off --steps 1 --warmup 1 --profile"
timeout 100 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --set full --import-source yes --kernel-name regex:quantize_tiles --launch-skip 3 --launch-count 1 -o $L/ncu-quant $B $STEP --out $L/ncu-q.json > $L/ncu-quant.log 2>&1
echo "ncu quant rc=$? at $(el) s" >> $S
timeout 100 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --set full --import-source yes --kernel-name regex:swiglu_fwd --launch-count 1 -o $L/ncu-swiglu $B $STEP --out $L/ncu-s.json > $L/ncu-swiglu.log 2>&1
echo "ncu swiglu rc=$? at $(el) s" >> $S
for f in quant swiglu; do /usr/local/cuda/bin/ncu --import $L/ncu-$f.ncu-rep --page details > $L/ncu-$f-details.txt 2>&1; done
grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|No Eligible|L2 Hit|Mem Busy" $L/ncu-quant-details.txt | head -20 >> $S
gemm() {  # tag
  timeout 60 $B gemm --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods lt_multistream --iters 10 --out $L/gemm-$1.json > $L/gemm-$1.log 2>&1
  echo "== gemm $1 rc=$? at $(el) s" >> $S; grep -E "lt_multistream" $L/gemm-$1.log >> $S
}
cd $OUT && tar czf logs.tgz logs && rm -rf logs; cat $S; exit 0
sed -i 's/__launch_bounds__(kTileThreads, 2) quantize_tiles_kernel/__launch_bounds__(kTileThreads, 3) quantize_tiles_kernel/' kernels/cuda/fp8_quantize.cu
build mb3
gemm mb3
gemm mb3b
sed -i 's/__launch_bounds__(kTileThreads, 3) quantize_tiles_kernel/__launch_bounds__(kTileThreads, 2) quantize_tiles_kernel/' kernels/cuda/fp8_quantize.cu
build mb2b
gemm mb2b
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
