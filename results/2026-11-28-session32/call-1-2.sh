#!/usr/bin/env bash
# Session 32, call 2 (as call 1, the idle warpgroup of a half tile now waits for the other)
# Session 32, call 1 (one H200): the row GEMMs' half tiles (live_halves: A and MMAs only for the
# 64-row halves that hold a group's rows). v0: main's grouped_gemm.cu (733e3f6), v1: this tree.
# GPU tests of the grouped kernels on v1; then moebench gemm v0/v1 alternating; then steps.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > $L/cmake.log 2>&1
CMD=$(python3 -c "
import json
for e in json.load(open('build-gpu/compile_commands.json')):
    if e['file'].endswith('kernels/cuda/grouped_gemm.cu'): print(e['command'].split(' -c ')[0])")
mkdir -p build-gpu/v0
( cd build-gpu && eval "$CMD -c $PWD/../devrun/base_grouped_gemm.cu -o v0/grouped_gemm.cu.o" > $L/build-v0.log 2>&1; echo "v0 obj rc=$?" >> $S ) &
cmake --build build-gpu -j16 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
wait
cd build-gpu
LINK=$(ninja -t commands moebench | tail -1 | sed 's/^: && //; s/ && :$//')
cp libmoe_cuda.a v0/libmoe_cuda.a && ar r v0/libmoe_cuda.a v0/grouped_gemm.cu.o &&
  eval "$(echo "$LINK" | sed "s# libmoe_cuda.a # v0/libmoe_cuda.a #; s# -o moebench # -o v0/moebench #")"
echo "v0 link rc=$?" >> $S
mkdir -p v1 && cp moebench v1/moebench
cd ..
echo "all built at $(el) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests --gtest_filter='GroupedGemm*:ExpertFfn*:*Fp8*' > $L/tests.log 2>&1
echo "== tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests.log | head >> $S
gm() {  # v name [more]
  local v=$1 n=$2; shift 2
  [ $(el) -gt 400 ] && { echo "skip $n v$v" >> $S; return; }
  timeout $TO build-gpu/v$v/moebench gemm --methods grouped_sm90 --iters 20 --set align=16 --set expert_grad_dtype=bf16 "$@" --out $L/gemm-$n-v$v.json > $L/gemm-$n-v$v.log 2>&1
  echo "== gemm $n v$v rc=$? at $(el) s: $(grep -E '^  [a-z]' $L/gemm-$n-v$v.log | grep -v dense | awk '{printf "%s %s  ", $1, $6}')" >> $S
}
TO=40
for v in 1 0; do gm $v ds2-routed-fp8b --config bench/deepseek_v3 --ep 2 --rows routed --set precision=fp8_block; done
TO=90
for r in 1 2; do for v in 0 1; do gm $v ds2-routed-r$r --config bench/deepseek_v3 --ep 2 --rows routed; done; done
for v in 0 1; do gm $v ds2-routed-c2 --config bench/deepseek_v3 --ep 2 --rows routed --set gemm.sm90_cluster=2; done
for v in 0 1; do gm $v ds2-bal --config bench/deepseek_v3 --ep 2; done
for r in 1 2; do for v in 0 1; do gm $v ds1-routed-r$r --config bench/deepseek_v3 --rows routed; done; done
for r in 1 2; do for v in 0 1; do gm $v qw-routed-r$r --config bench/qwen3_30b_a3b --rows routed; done; done
for v in 0 1; do gm $v mx-routed --config bench/mixtral_8x7b --set tokens_per_rank=8192 --rows routed; done
# steps: one GPU, grouped_sm90 pinned
st() {  # v name [more]
  local v=$1 n=$2; shift 2
  [ $(el) -gt 520 ] && { echo "skip step $n v$v" >> $S; return; }
  timeout 120 build-gpu/v$v/moebench run --backend cuda --set expert_grad_dtype=bf16 --set roofline=false --set align=16 --set check=off --set gemm.method=grouped_sm90 --steps 20 --warmup 8 "$@" --out $L/step-$n-v$v.json > $L/step-$n-v$v.log 2>&1
  echo "== step $n v$v rc=$? at $(el) s: $(grep -E '^  (experts_fwd|experts_bwd|step) ' $L/step-$n-v$v.log | awk '{printf "%s %s  ", $1, $2}') $(grep -E '^# clocks' $L/step-$n-v$v.log | cut -c1-60)" >> $S
}
for v in 0 1; do st $v qw-graph --config bench/qwen3_30b_a3b --set graph=true --set warmup_s=3; done
for v in 0 1; do st $v ds1 --config bench/deepseek_v3 --set warmup_s=3; done
for v in 1 0; do st $v qw-graph-r2 --config bench/qwen3_30b_a3b --set graph=true --set warmup_s=3; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
