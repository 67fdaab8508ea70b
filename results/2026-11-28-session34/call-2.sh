#!/usr/bin/env bash
# Session 34, call 2 (one H200), prepared in session 33: (1) the GPU tests
# BufferPlanCuda, Router* (with router-scratch-estimate.diff applied, they are what it needs); (2) split-half-tiles.diff, v0 (-DMOE_EXP_SPLIT=0)
# against v1, GEMMs and steps; (3) the Mixtral-8x7B fp8_tensor check with the amax print
# (fp8-tensor-amax-print.diff, printing only with MOE_DEBUG_AMAX=1). Run from the repository root
# after `git apply results/2026-11-28-session33/split-half-tiles.diff
# results/2026-11-28-session33/fp8-tensor-amax-print.diff` (both leave main's behaviour alone
# with MOE_EXP_SPLIT=0 and without MOE_DEBUG_AMAX).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > $L/cmake.log 2>&1
CMD=$(python3 -c "
import json
for e in json.load(open('build-gpu/compile_commands.json')):
    if e['file'].endswith('kernels/cuda/grouped_gemm.cu'): print(e['command'].split(' -c ')[0])")
mkdir -p build-gpu/v0 build-gpu/v1
( cd build-gpu && eval "$CMD -DMOE_EXP_SPLIT=0 -c $PWD/../kernels/cuda/grouped_gemm.cu -o v0/grouped_gemm.cu.o" > $L/build-v0.log 2>&1 ) &
cmake --build build-gpu -j16 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
wait
cd build-gpu
LINK=$(ninja -t commands moebench | tail -1 | sed 's/^: && //; s/ && :$//')
cp moebench v1/moebench
cp libmoe_cuda.a v0/libmoe_cuda.a && ar r v0/libmoe_cuda.a v0/grouped_gemm.cu.o &&
  eval "$(echo "$LINK" | sed "s# libmoe_cuda.a # v0/libmoe_cuda.a #; s# -o moebench # -o v0/moebench #")"
echo "v0 link rc=$? at $(el) s" >> $S
cd ..
timeout 150 build-gpu/tests/moe_cuda_tests --gtest_filter='BufferPlanCuda*:Router*:GroupedGemm*:ExpertFfn*' > $L/tests.log 2>&1
echo "GPU tests (v1) rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Which is' $L/tests.log | head -20 >> $S
gm() {  # v name [more]
  local v=$1 n=$2; shift 2
  [ $(el) -gt 330 ] && { echo "skip $n v$v" >> $S; return; }
  timeout 40 build-gpu/v$v/moebench gemm --methods grouped_sm90 --iters 20 --set align=16 --set expert_grad_dtype=bf16 "$@" --out $L/gemm-$n-v$v.json > $L/gemm-$n-v$v.log 2>&1
  echo "== gemm $n v$v rc=$? at $(el) s: $(grep -E '^  [a-z]' $L/gemm-$n-v$v.log | grep -v dense | awk '{printf "%s %s  ", $1, $6}')" >> $S
}
for r in 1 2; do for v in 0 1; do gm $v ds2-routed-r$r --config configs/bench/deepseek_v3.json --ep 2 --rows routed; done; done
for v in 0 1; do gm $v ds1-routed --config configs/bench/deepseek_v3.json --rows routed; done
for v in 1 0; do gm $v qw8k-routed --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=8192 --rows routed; done
st() {  # v name [more]
  local v=$1 n=$2; shift 2
  [ $(el) -gt 450 ] && { echo "skip step $n v$v" >> $S; return; }
  timeout 40 build-gpu/v$v/moebench run --backend cuda --set expert_grad_dtype=bf16 --set roofline=false --set align=16 --set check=off --set gemm.method=grouped_sm90 --steps 20 --warmup 8 --set warmup_s=2 "$@" --out $L/step-$n-v$v.json > $L/step-$n-v$v.log 2>&1
  echo "== step $n v$v rc=$? at $(el) s: $(grep -E '^  (experts_fwd|experts_bwd|step) ' $L/step-$n-v$v.log | awk '{printf "%s %s  ", $1, $2}') $(grep -E '^# clocks' $L/step-$n-v$v.log | cut -c10-30)" >> $S
}
for r in 1 2; do
  for v in 0 1; do st $v ds1-r$r --config bench/deepseek_v3; done
  for v in 1 0; do st $v qw-r$r --config bench/qwen3_30b_a3b --set graph=true; done
done
[ $(el) -lt 470 ] && { MOE_DEBUG_AMAX=1 timeout 90 build-gpu/v0/moebench run --config bench/mixtral_8x7b --backend cuda --set align=16 --set roofline=false --set check=first --set precision=fp8_tensor --set fp8_weights=cached --steps 3 --warmup 2 --set warmup_s=0 > $L/amax.log 2>&1; echo "== amax rc=$? at $(el) s: $(grep -E '^# check:' $L/amax.log)" >> $S; grep -E '^# amax (backend call 10 |reference)' $L/amax.log | head -20 >> $S; }
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
