#!/usr/bin/env bash
# Session 29, call 3 (2 GPUs): FP8 on 256 columns with turns (the two MMA warpgroups issue their
# column halves' MMAs by turns, so that one's MMAs run while the other drains and adds). Tree
# (v1: turns) against v0 (grouped_gemm.cu recompiled with -DMOE_EXP_TURNS=0: main's kernel).
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
( cd build-gpu && eval "$CMD -DMOE_EXP_TURNS=0 -o v0/grouped_gemm.cu.o" > $L/build-v0.log 2>&1 ) &
cmake --build build-gpu -j28 --target moebench moe_cuda_tests > $L/build.log 2>&1
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
export CUDA_VISIBLE_DEVICES=0
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "all GPU tests (v1) rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests.log | head >> $S
gm() {  # v name config prec [more]
  local v=$1 n=$2 cfg=$3 p=$4; shift 4
  timeout 60 build-gpu/v$v/moebench gemm --config configs/bench/$cfg.json --methods grouped_sm90 --iters 20 --set align=16 \
    --set expert_grad_dtype=bf16 --set precision=$p "$@" --out $L/gemm-$n-v$v.json > $L/gemm-$n-v$v.log 2>&1
  echo "== gemm $n v$v rc=$? at $(el) s" >> $S
  grep -E "^  [a-z_]+ +$p:" $L/gemm-$n-v$v.log >> $S
}
for r in 1 2; do
  for v in 0 1; do gm $v ds-ep2-blk deepseek_v3 fp8_block --ep 2; done
done
for r in 1 2; do
  for v in 0 1; do gm $v ds-ep2-ten deepseek_v3 fp8_tensor --ep 2; done
done
for v in 0 1 0 1; do gm $v mx-ten mixtral_8x7b fp8_tensor --set tokens_per_rank=8192; done
for v in 0 1 0 1; do gm $v qw-blk qwen3_30b_a3b fp8_block --set tokens_per_rank=8192; done
unset CUDA_VISIBLE_DEVICES
M="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];p=t['phases']
print('step', round(t['step']['median'],3), 'fwd', round(p['experts_fwd']['median'],3), 'bwd', round(p['experts_bwd']['median'],3), 'MHz', [round(r['sm_mhz']['median']) for r in t['clocks']['ranks']], 'check', d.get('check',{}).get('passed'))" 2>&1 | tail -1; }
go() {  # v name np config [more]
  local v=$1 n=$2 np=$3 cfg=$4; shift 4
  [ $(el) -gt 480 ] && { echo "skip $n" >> $S; return; }
  timeout 120 $M -np $np build-gpu/v$v/moebench run --config configs/bench/$cfg.json --backend cuda --set expert_grad_dtype=bf16 --set roofline=false \
    --set mesh.ep=$np --set gemm.method=grouped_sm90 --set align=16 "$@" --out $L/$n-v$v.json > $L/$n-v$v.log 2>&1
  echo "== $n v$v rc=$? at $(el) s: $(row $L/$n-v$v.json)" >> $S
  grep -E '^# check' $L/$n-v$v.log >> $S
}
go 1 chk-qw-ep2-blk 2 qwen3_30b_a3b --set precision=fp8_block --set dispatch=nvlink --set check=first --steps 2 --warmup 3 --set warmup_s=0
go 1 chk-ds64-ep2-ten 2 deepseek_v3 --set precision=fp8_tensor --set model.experts=64 --set tokens_per_rank=2048 --set check=first --steps 2 --warmup 3 --set warmup_s=0
P="--set check=off --steps 20 --warmup 8 --set fp8_weights=cached --set dispatch=nvlink"
for r in 1 2; do
  for v in 0 1; do go $v ds-ep2-blk-r$r 2 deepseek_v3 $P --set precision=fp8_block; done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
