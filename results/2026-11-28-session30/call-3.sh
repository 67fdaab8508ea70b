#!/usr/bin/env bash
# Session 30, call 3 (1 GPU): the FP8 weight gradients' last K stage of a group skips its MMA
# steps past the group's rows (v1, the tree: MOE_EXP_KSKIP=1) against main's (v0). GPU tests of
# the grouped kernels on v1; moebench gemm on routed rows, alternating; ncu on wgrad_in routed;
# FP8 steps at EP 1.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > $L/cmake.log 2>&1
CMD=$(python3 -c "
import json
for e in json.load(open('build-gpu/compile_commands.json')):
    if e['file'].endswith('kernels/cuda/grouped_gemm.cu'): print(e['command'].split(' -o ')[0])")
mkdir -p build-gpu/v0
( cd build-gpu && eval "$CMD -DMOE_EXP_KSKIP=0 -o v0/grouped_gemm.cu.o" > $L/build-v0.log 2>&1 ) &
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
timeout 150 build-gpu/tests/moe_cuda_tests --gtest_filter='*Grouped*:*Fp8*' > $L/tests.log 2>&1
echo "grouped/fp8 GPU tests (v1) rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests.log | head >> $S
gm() {  # v name [more]
  local v=$1 n=$2; shift 2
  [ $(el) -gt 400 ] && { echo "skip $n v$v" >> $S; return; }
  timeout 90 build-gpu/v$v/moebench gemm --methods grouped_sm90 --iters 20 --set align=16 --set expert_grad_dtype=bf16 "$@" --out $L/gemm-$n-v$v.json > $L/gemm-$n-v$v.log 2>&1
  echo "== gemm $n v$v rc=$? at $(el) s: $(grep -E '^  [a-z]' $L/gemm-$n-v$v.log | grep -v dense | grep fp8 | awk '{printf "%s %s  ", $1, $6}')" >> $S
}
for r in 1 2; do for v in 0 1; do gm $v ds-ep2-b-routed-r$r --config bench/deepseek_v3 --ep 2 --set precision=fp8_block --rows routed; done; done
for v in 0 1; do gm $v ds-ep2-t-routed --config bench/deepseek_v3 --ep 2 --set precision=fp8_tensor --rows routed; done
for v in 0 1; do gm $v ds-ep1-b-routed --config bench/deepseek_v3 --set precision=fp8_block --rows routed; done
for v in 0 1; do gm $v qw-b-routed --config bench/qwen3_30b_a3b --set precision=fp8_block --rows routed; done
for v in 0 1; do gm $v ds-ep2-b-bal --config bench/deepseek_v3 --ep 2 --set precision=fp8_block; done
for v in 0 1; do
  timeout 120 /usr/local/cuda/bin/ncu --clock-control none --kernel-name regex:grouped_gemm_kernel --launch-skip 35 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    build-gpu/v$v/moebench gemm --config bench/deepseek_v3 --ep 2 --methods grouped_sm90 --iters 1 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_block --rows routed > $L/ncu-wgrad_in-v$v.txt 2> $L/ncu-wgrad_in-v$v.err
  echo "== ncu wgrad_in routed v$v rc=$? at $(el) s" >> $S
  grep -E 'grouped_gemm_kernel<|Duration|Throughput|highest-utilized|Issue Slots|stall' $L/ncu-wgrad_in-v$v.txt | cut -c1-160 | head -16 >> $S
done
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];p=t['phases']
print('step', round(t['step']['median'],3), 'experts', round(p['experts_fwd']['median'],3), round(p['experts_bwd']['median'],3), 'clocks', [round(r['sm_mhz']['median']) for r in t['clocks']['ranks']])" 2>&1 | tail -1; }
go() {  # v name config [more]
  local v=$1 n=$2 cfg=$3; shift 3
  [ $(el) -gt 500 ] && { echo "skip $n v$v" >> $S; return; }
  timeout 120 build-gpu/v$v/moebench run --config $cfg --backend cuda --set expert_grad_dtype=bf16 --set roofline=false --set align=16 \
    --set check=off --steps 20 --warmup 8 --set gemm.method=grouped_sm90 "$@" --out $L/$n-v$v.json > $L/$n-v$v.log 2>&1
  echo "== $n v$v rc=$? at $(el) s: $(row $L/$n-v$v.json)" >> $S
}
for r in 1 2; do for v in 0 1; do go $v qw-fp8b-graph-r$r bench/qwen3_30b_a3b --set precision=fp8_block --set fp8_weights=cached --set graph=true; done; done
for v in 0 1; do go $v ds-ep1-fp8b bench/deepseek_v3 --set precision=fp8_block --set fp8_weights=cached; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
