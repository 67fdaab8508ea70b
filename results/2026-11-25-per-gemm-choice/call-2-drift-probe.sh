#!/usr/bin/env bash
# Session 17, call 2 (one H200): probe of the per-step experts time through warm-up and timed steps
# (a temporary log line, MOE_PROBE_STEPS), to see why the per-GEMM mix's tries measured slower than
# the same methods' uniform tries.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 --target moebench > /tmp/build.log 2>&1; echo "new rc=$?" >> $S
grep -B2 -A10 " error" /tmp/build.log | head -30 >> $S
echo "built at $(( $(date +%s) - START )) s" >> $S
export MOE_PROBE_STEPS=1
run() {
  n=$1; shift
  timeout 110 build-gpu/moebench run --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off "$@" --out $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n $* rc=$?" >> $S
  grep -E '^# expert GEMMs' $OUT/logs/$n.log | cut -c1-300 >> $S
  grep -E "PROBE|each GEMM" $OUT/logs/$n.log | sed 's/^.*info: //' | cut -c1-330 >> $S
}
M="--config configs/bench/mixtral_8x7b.json --set tokens_per_rank=8192"
run mix_block_lt $M --set precision=fp8_block --set gemm.method=lt_multistream --warmup 12 --steps 8
run mix_block_auto $M --set precision=fp8_block --warmup 8 --steps 8
run mix_bf16_lt $M --set precision=bf16 --set gemm.method=lt_multistream --warmup 12 --steps 8
run mix_bf16_auto $M --set precision=bf16 --warmup 8 --steps 8
run mix_bf16_auto_fixedinputs $M --set precision=bf16 --warmup 8 --steps 8 --set routing.mode=balanced
run ds_bf16_auto --config configs/bench/deepseek_v3.json --set tokens_per_rank=4096 --set precision=bf16 --warmup 8 --steps 8
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
