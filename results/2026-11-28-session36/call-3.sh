#!/usr/bin/env bash
# Session 36, call 3 (one H200): the bench workloads at EP 1 with the roofline on (the cost
# model's floor for each phase from the run's calibrated GEMM rate and copy bandwidth), bf16 and
# FP8, the GEMM method pinned: how far each phase is from its floor.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
run() {  # name lim [more]
  local n=$1 lim=$2; shift 2
  [ $(el) -gt $lim ] && { echo "skip $n" >> $S; return; }
  timeout 100 $B run --backend cuda --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=5 --steps 20 --warmup 5 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s" >> $S
  grep -E '^  (router_fwd|layout|shared_fwd|dispatch_fwd|experts_fwd|combine_fwd|combine_bwd|experts_bwd|shared_bwd|dispatch_bwd|router_bwd|step) |^# roofline|^# clocks|^# throughput' $L/$n.log >> $S
}
run qw-graph 200 --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set graph=true
run qw8k 260 --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set tokens_per_rank=8192
run mx 330 --config bench/mixtral_8x7b --set gemm.method=lt_multistream --set tokens_per_rank=8192
run mx-fp8 400 --config bench/mixtral_8x7b --set gemm.method=lt_multistream --set tokens_per_rank=8192 --set precision=fp8_tensor --set fp8_weights=cached
run ds 470 --config bench/deepseek_v3 --set gemm.method=grouped_sm90
run ds-fp8 540 --config bench/deepseek_v3 --set gemm.method=grouped_sm90 --set precision=fp8_tensor --set fp8_weights=cached
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
