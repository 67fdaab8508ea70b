#!/usr/bin/env bash
# Session 30, call 2 (1 GPU): what the FP8 kernel's drains cost. v0: main's kernel; v1: the FP8
# 256-column tiles' MMAs straight into the fp32 total (no partial sums, no drains, no scales:
# times only, results wrong) -- the most any drain-free design could gain. ncu sections on v0's
# FP8 up projection.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > $L/cmake.log 2>&1
CMD=$(python3 -c "
import json
for e in json.load(open('build-gpu/compile_commands.json')):
    if e['file'].endswith('kernels/cuda/grouped_gemm.cu'): print(e['command'].split(' -o ')[0])")
mkdir -p build-gpu/v1
( cd build-gpu && eval "$CMD -DMOE_EXP_NODRAIN=1 -o v1/grouped_gemm.cu.o" > $L/build-v1.log 2>&1 ) &
cmake --build build-gpu -j16 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
wait
cd build-gpu
LINK=$(ninja -t commands moebench | tail -1 | sed 's/^: && //; s/ && :$//')
cp libmoe_cuda.a v1/libmoe_cuda.a && ar r v1/libmoe_cuda.a v1/grouped_gemm.cu.o &&
  eval "$(echo "$LINK" | sed "s# libmoe_cuda.a # v1/libmoe_cuda.a #; s# -o moebench # -o v1/moebench #")"
echo "v1 link rc=$?" >> $S
mkdir -p v0 && cp moebench v0/moebench
cd ..
echo "all built at $(el) s" >> $S
for p in fp8_tensor fp8_block; do
  timeout 120 /usr/local/cuda/bin/ncu --clock-control none --kernel-name regex:grouped_gemm_kernel --launch-skip 20 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section ComputeWorkloadAnalysis \
    build-gpu/v0/moebench gemm --config bench/deepseek_v3 --ep 2 --methods grouped_sm90 --iters 1 --set align=16 --set expert_grad_dtype=bf16 --set precision=$p > $L/ncu-up-$p.txt 2> $L/ncu-up-$p.err
  echo "== ncu up $p rc=$? at $(el) s" >> $S
  grep -E 'grouped_gemm_kernel<|Duration|Throughput|Pipe|highest-utilized|Issue Slots|stalled' $L/ncu-up-$p.txt | cut -c1-160 | head -24 >> $S
done
gm() {  # v name [more]
  local v=$1 n=$2; shift 2
  [ $(el) -gt 420 ] && { echo "skip $n v$v" >> $S; return; }
  timeout 90 build-gpu/v$v/moebench gemm --methods grouped_sm90 --iters 20 --set align=16 --set expert_grad_dtype=bf16 "$@" --out $L/gemm-$n-v$v.json > $L/gemm-$n-v$v.log 2>&1
  echo "== gemm $n v$v rc=$? at $(el) s: $(grep -E '^  [a-z]' $L/gemm-$n-v$v.log | grep -v dense | awk '{printf "%s %s %s  ", $1, $2, $6}')" >> $S
}
for r in 1 2; do for v in 0 1; do gm $v ds-ep2-t-r$r --config bench/deepseek_v3 --ep 2 --set precision=fp8_tensor; done; done
for r in 1 2; do for v in 0 1; do gm $v ds-ep2-b-r$r --config bench/deepseek_v3 --ep 2 --set precision=fp8_block; done; done
for v in 0 1; do gm $v ds-ep2-b-routed --config bench/deepseek_v3 --ep 2 --set precision=fp8_block --rows routed; done
for v in 0 1; do gm $v mx-t --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set precision=fp8_tensor; done
for v in 0 1; do gm $v qw-b --config bench/qwen3_30b_a3b --set precision=fp8_block; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
