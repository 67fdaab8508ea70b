#!/usr/bin/env bash
# Session 36, call 4 (one H200): the FP8 roofline rate. The calibration times cuBLASLt's FP8
# matmul (8192^3) in the run's recipe, and the FP8 expert phases' floors take that rate (and the
# cached weights' one-byte codes): Mixtral-8x7B and DeepSeek-V3 in both recipes, Qwen3-30B-A3B
# fp8_tensor, with bf16 beside for the same call's dense rate.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
run() {  # name lim [more]
  local n=$1 lim=$2; shift 2
  [ $(el) -gt $lim ] && { echo "skip $n" >> $S; return; }
  timeout 100 $B run --backend cuda --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=3 --steps 20 --warmup 5 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s" >> $S
  grep -E '^  (shared_fwd|experts_fwd|experts_bwd|shared_bwd|step) |^# roofline|^# efficiency|^# clocks|error' $L/$n.log >> $S
}
run mx-bf16 200 --config bench/mixtral_8x7b --set gemm.method=lt_multistream --set tokens_per_rank=8192
run mx-tensor 240 --config bench/mixtral_8x7b --set gemm.method=lt_multistream --set tokens_per_rank=8192 --set precision=fp8_tensor --set fp8_weights=cached
run mx-block 280 --config bench/mixtral_8x7b --set gemm.method=lt_multistream --set tokens_per_rank=8192 --set precision=fp8_block --set fp8_weights=cached
run ds-tensor 320 --config bench/deepseek_v3 --set gemm.method=grouped_sm90 --set precision=fp8_tensor --set fp8_weights=cached
run ds-block 360 --config bench/deepseek_v3 --set gemm.method=grouped_sm90 --set precision=fp8_block --set fp8_weights=cached
run qw-tensor 400 --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set precision=fp8_tensor --set fp8_weights=per_step
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
