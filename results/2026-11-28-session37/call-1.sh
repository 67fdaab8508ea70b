#!/usr/bin/env bash
# Session 37, call 1 (one H200): session 36's reference-ties-one-place.diff on the GPU reference's
# FP8 check (applied tree, then reverted and rebuilt: the check's figures must be equal to the
# last digit), then Nsight Compute's per-kernel time and DRAM bytes of one step: Mixtral-8x7B
# fp8_tensor and bf16 (lt_multistream), Qwen3-30B-A3B bf16 (grouped_sm90).
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
  echo "build $1 rc=$? at $(el) s" >> $S
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
build diff
checks diff
git apply -R results/2026-11-28-session36/reference-ties-one-place.diff 2>>$S || patch -R -p1 < results/2026-11-28-session36/reference-ties-one-place.diff >> $S 2>&1
build main
checks main
for n in qw-t qw-b mx-t; do
  if cmp -s $L/$n-diff.fig $L/$n-main.fig && [ -s $L/$n-main.fig ]; then echo "$n figures: equal" >> $S; else echo "$n figures: DIFFER" >> $S; diff $L/$n-diff.fig $L/$n-main.fig >> $S; fi
done
cat $L/qw-t-diff.fig >> $S
prof() {  # name lim [more]
  local n=$1 lim=$2; shift 2
  [ $(el) -gt $lim ] && { echo "skip $n" >> $S; return; }
  timeout 150 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --csv \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second \
    $B run --backend cuda --set align=16 --set roofline=false --set warmup_s=0 --set check=off --steps 1 --warmup 1 --profile "$@" --out $L/ncu-$n.json > $L/ncu-$n.csv 2> $L/ncu-$n.err
  echo "== ncu $n rc=$? at $(el) s, $(grep -c gpu__time_duration $L/ncu-$n.csv) kernels" >> $S
}
prof mx-fp8t 430 --config bench/mixtral_8x7b --set gemm.method=lt_multistream --set precision=fp8_tensor --set fp8_weights=cached --set expert_grad_dtype=bf16
prof mx-bf16 480 --config bench/mixtral_8x7b --set gemm.method=lt_multistream --set expert_grad_dtype=bf16
prof qw-bf16 530 --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set expert_grad_dtype=bf16
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
