#!/usr/bin/env bash
# Session 33, call 3 (one H200): the tree after 1dad99b: the FP8 weights' layout from core
# (fp8_weights_layout) and the CUDA twin of the buffer-plan test (BufferPlanCuda): all GPU tests;
# FP8 checks per recipe; DeepSeek-V3 and Mixtral-8x7B steps at EP 1 on main's kernel.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j16 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 60 build-gpu/tests/moe_cuda_tests --gtest_filter='BufferPlanCuda*' > $L/tests-plan.log 2>&1
echo "BufferPlanCuda rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests-plan.log | tr '\n' ' ')" >> $S
grep -E "Which is|Expected equality|bytes_a_cuda|cuda_estimate|extra|Failure" $L/tests-plan.log | head -60 >> $S
timeout 150 build-gpu/tests/moe_cuda_tests --gtest_filter='-BufferPlanCuda*' > $L/tests.log 2>&1
echo "other GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests.log | head >> $S
B=build-gpu/moebench
chk() {  # name [args]
  local n=$1; shift
  [ $(el) -gt 400 ] && { echo "skip $n" >> $S; return; }
  timeout 60 $B run --backend cuda --set align=16 --set roofline=false --steps 3 --warmup 2 --set warmup_s=0 --set check=first "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# check:' $L/$n.log) | $(grep -E '^# memory: high' $L/$n.log | cut -c1-50)" >> $S
}
chk qw-fp8t --config bench/qwen3_30b_a3b --set precision=fp8_tensor
chk qw-fp8b-sm90 --config bench/qwen3_30b_a3b --set precision=fp8_block --set gemm.method=grouped_sm90 --set fp8_weights=cached
chk mx-fp8t --config bench/mixtral_8x7b --set precision=fp8_tensor --set fp8_weights=cached
st() {  # name [args]
  local n=$1; shift
  [ $(el) -gt 500 ] && { echo "skip $n" >> $S; return; }
  timeout 50 $B run --backend cuda --set expert_grad_dtype=bf16 --set roofline=false --set align=16 --set check=off --steps 20 --warmup 8 --set warmup_s=3 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  (experts_fwd|experts_bwd|step) ' $L/$n.log | awk '{printf "%s %s  ", $1, $2}') $(grep -E '^# clocks' $L/$n.log | cut -c10-30) $(grep -E '^# expert GEMMs' $L/$n.log | cut -c1-80)" >> $S
}
st ds1 --config bench/deepseek_v3 --set gemm.method=grouped_sm90
st ds1-auto --config bench/deepseek_v3
st mx1-auto --config bench/mixtral_8x7b --set tokens_per_rank=8192
st mx1-sm90 --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=grouped_sm90
st qw1-graph --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set graph=true
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
