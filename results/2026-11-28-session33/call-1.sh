#!/usr/bin/env bash
# Session 33, call 1 (one H200): main at 95ff298 (FP8 buffer sizes moved to core, not yet run on a
# GPU): all GPU tests; one FP8 run per recipe with check: first; high-water against --dry-run.
# Then steps of main (v0) against wgmma_wait<2> (v1, results/2026-11-28-session32/mma-depth-2.diff)
# on the three bench workloads, alternating, three rounds.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > $L/cmake.log 2>&1
CMD=$(python3 -c "
import json
for e in json.load(open('build-gpu/compile_commands.json')):
    if e['file'].endswith('kernels/cuda/grouped_gemm.cu'): print(e['command'].split(' -c ')[0])")
mkdir -p build-gpu/v1
( cd build-gpu && eval "$CMD -c $PWD/../devrun/depth2_grouped_gemm.cu -o v1/grouped_gemm.cu.o" > $L/build-v1.log 2>&1 ) &
cmake --build build-gpu -j16 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
wait
cd build-gpu
LINK=$(ninja -t commands moebench | tail -1 | sed 's/^: && //; s/ && :$//')
mkdir -p v0 && cp moebench v0/moebench
cp libmoe_cuda.a v1/libmoe_cuda.a && ar r v1/libmoe_cuda.a v1/grouped_gemm.cu.o &&
  eval "$(echo "$LINK" | sed "s# libmoe_cuda.a # v1/libmoe_cuda.a #; s# -o moebench # -o v1/moebench #")"
echo "v1 link rc=$? at $(el) s" >> $S
cd ..
timeout 170 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests.log | head >> $S
B=build-gpu/v0/moebench
mem() {  # name [args]: a run, then its --dry-run; high-water against the estimate
  local n=$1; shift
  [ $(el) -gt 330 ] && { echo "skip $n" >> $S; return; }
  timeout 60 $B run --backend cuda --set align=16 --set roofline=false "$@" --out $L/$n.json > $L/$n.log 2>&1
  local rc=$?
  timeout 20 $B run --backend cuda --set align=16 --set roofline=false "$@" --dry-run > $L/$n-dry.log 2>&1
  echo "== $n rc=$rc at $(el) s: $(grep -E '^# check:' $L/$n.log) | $(grep -E '^# memory: high' $L/$n.log | cut -c1-60) | $(grep -E '^# memory per rank' $L/$n-dry.log | cut -c1-90)" >> $S
}
mem qw-fp8t-chk --config bench/qwen3_30b_a3b --set precision=fp8_tensor --set check=first --steps 3 --warmup 2 --set warmup_s=0
mem qw-fp8b-chk --config bench/qwen3_30b_a3b --set precision=fp8_block --set check=first --steps 3 --warmup 2 --set warmup_s=0
mem mx-fp8b-chk --config bench/mixtral_8x7b --set precision=fp8_block --set fp8_weights=cached --set check=first --steps 3 --warmup 2 --set warmup_s=0
mem mx-fp8t --config bench/mixtral_8x7b --set precision=fp8_tensor --set fp8_weights=cached --set check=off --steps 3 --warmup 2 --set warmup_s=0
mem ds-fp8b --config bench/deepseek_v3 --set precision=fp8_block --set fp8_weights=cached --set check=off --steps 3 --warmup 2 --set warmup_s=0
st() {  # v name [more]
  local v=$1 n=$2; shift 2
  [ $(el) -gt 560 ] && { echo "skip step $n v$v" >> $S; return; }
  timeout 40 build-gpu/v$v/moebench run --backend cuda --set expert_grad_dtype=bf16 --set roofline=false --set align=16 --set check=off --set gemm.method=grouped_sm90 --steps 20 --warmup 8 "$@" --out $L/step-$n-v$v.json > $L/step-$n-v$v.log 2>&1
  echo "== step $n v$v rc=$? at $(el) s: $(grep -E '^  (experts_fwd|experts_bwd|step) ' $L/step-$n-v$v.log | awk '{printf "%s %s  ", $1, $2}') $(grep -E '^# clocks' $L/step-$n-v$v.log | cut -c10-30)" >> $S
}
for r in 1 2 3; do
  for v in 0 1; do st $v ds1-r$r --config bench/deepseek_v3 --set warmup_s=2; done
  for v in 1 0; do st $v mx1-r$r --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set warmup_s=2; done
  for v in 0 1; do st $v qw-r$r --config bench/qwen3_30b_a3b --set graph=true --set warmup_s=2; done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
