#!/usr/bin/env bash
# Session 17, call 5 (one H200): FP8 steps with GEMMs pinned to different methods, checked against
# the float64 reference: tiny (every step) and Qwen3-30B-A3B at 256 tokens (first step).
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 --target moebench > /tmp/build.log 2>&1; echo "new rc=$?" >> $S
grep -B2 -A10 " error" /tmp/build.log | head -30 >> $S
echo "built at $(( $(date +%s) - START )) s" >> $S
MIX="--set gemm.method=grouped_sm90 --set gemm.method_up=lt_multistream --set gemm.method_dgrad_x=lt_multistream --set gemm.method_wgrad_in=lt_multistream"
MIX2="--set gemm.method=lt_multistream --set gemm.method_down=grouped_sm90 --set gemm.method_dgrad_a=grouped_sm90 --set gemm.method_wgrad_out=grouped_sm90"
chk() {
  n=$1; t=$2; shift 2
  timeout $t build-gpu/moebench run "$@" --out $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S
  grep -E '^# expert GEMMs|^# check' $OUT/logs/$n.log | cut -c1-250 >> $S
  grep -E "^  (out|dx|dw_in|dw_out) " $OUT/logs/$n.log | head -4 >> $S
}
T="--config configs/tiny.json --backend cuda --set align=16 --set check=every --steps 4 --warmup 2"
for p in fp8_block fp8_tensor; do
  chk tiny_${p}_mix 60 $T --set precision=$p $MIX
  chk tiny_${p}_mix2 60 $T --set precision=$p $MIX2 --set model.shared_experts=1 --set model.shared_ffn=32
done
chk tiny_bf16_mix2_pipeline 60 $T $MIX2 --set gemm.method_up=grouped_batched --set overlap=pipeline --set overlap_chunks=2
echo "tiny at $(( $(date +%s) - START )) s" >> $S
chk qwen3_fp8_block_mix 260 --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=256 --backend cuda --set align=16 --set check=first --steps 1 --warmup 2 --set precision=fp8_block $MIX
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
