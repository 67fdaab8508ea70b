#!/usr/bin/env bash
# Session 28, call 3 (2 GPUs): the clocks line (NVML sampler) and the weight gradients' L2 hint.
# Builds: the tree (h1: C stores evict_first) and, by recompiling grouped_gemm.cu alone, h0 (no
# hint: main's kernel) and h3 (h1 + operand loads evict_last). GPU tests; Qwen3-30B-A3B's check
# at EP 2; steps alternating h0/h1/h3 at settled clocks (warmup_s 5), with the clocks line.
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
VARS="0 3"
for v in $VARS; do
  mkdir -p build-gpu/v$v
  ( cd build-gpu && eval "$CMD -DMOE_EXP_HINT=$v -o v$v/grouped_gemm.cu.o" > $L/build-v$v.log 2>&1 ) &
done
cmake --build build-gpu -j28 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
wait
cd build-gpu
LINK=$(ninja -t commands moebench | tail -1 | sed 's/^: && //; s/ && :$//')
for v in $VARS; do
  cp libmoe_cuda.a v$v/libmoe_cuda.a && ar r v$v/libmoe_cuda.a v$v/grouped_gemm.cu.o &&
    eval "$(echo "$LINK" | sed "s# libmoe_cuda.a # v$v/libmoe_cuda.a #; s# -o moebench # -o v$v/moebench #")"
  echo "v$v link rc=$?" >> $S
done
cd ..
echo "all built at $(el) s" >> $S
export CUDA_VISIBLE_DEVICES=0
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|NvmlClocks' $L/tests.log | head >> $S
unset CUDA_VISIBLE_DEVICES
bin() { [ $1 = 1 ] && echo build-gpu/moebench || echo build-gpu/v$1/moebench; }
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];p=t['phases'];c=t['clocks']
print('step', round(t['step']['median'],3), 'experts', round(p['experts_fwd']['median'],3), round(p['experts_bwd']['median'],3), 'clocks', [(r['rank'], round(r['sm_mhz']['median']), round(r['power_w']['median']), r['samples'], round(r['power_limited_share'],2)) for r in c['ranks']] or c['why_none'])" 2>&1 | tail -1; }
go() {  # name np variant config [more]
  local n=$1 np=$2 v=$3 cfg=$4; shift 4
  [ $(el) -gt 570 ] && { echo "skip $n" >> $S; return; }
  local dev=0; [ $np -eq 2 ] && dev=0,1
  timeout 150 mpirun --allow-run-as-root -np $np -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY -x CUDA_VISIBLE_DEVICES=$dev \
    $(bin $v) run --config configs/bench/$cfg.json --backend cuda --set expert_grad_dtype=bf16 --set roofline=false \
    --set align=16 --set mesh.ep=$np --set gemm.method=grouped_sm90 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (clocks|check|warning)' $L/$n.log >> $S
}
go check-qwen3-ep2 2 1 qwen3_30b_a3b --set dispatch=nvlink --set graph=true --set check=first --steps 2 --warmup 3 --set warmup_s=0
P="--set check=off --steps 20 --warmup 8"
for r in 1 2; do
  for v in 0 1 3; do go deepseek-ep2-h$v-r$r 2 $v deepseek_v3 $P --set dispatch=nvlink; done
done
for r in 1 2; do
  for v in 0 1 3; do go qwen3-ep1-h$v-r$r 1 $v qwen3_30b_a3b $P --set graph=true; done
done
for v in 0 1; do go deepseek-ep1-h$v 1 $v deepseek_v3 $P; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
