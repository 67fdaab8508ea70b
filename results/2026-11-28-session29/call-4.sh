#!/usr/bin/env bash
# Session 29, call 4 (2 GPUs): bf16 weight gradients stored straight from the registers (each
# quad of lanes transposes four 8-column blocks, 16-byte streaming stores; no staging boxes, no
# TMA store, one more K stage). Tree v1 (direct, 8 stages) against v0 (-DMOE_EXP_DIRECT=0:
# main's staging boxes) and v2 (-DMOE_EXP_DIRECT=2: direct, 9 stages).
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
for v in 0 2; do
  mkdir -p build-gpu/v$v
  ( cd build-gpu && eval "$CMD -DMOE_EXP_DIRECT=$v -Xptxas -v -o v$v/grouped_gemm.cu.o" > $L/build-v$v.log 2>&1 ) &
done
cmake --build build-gpu -j28 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
wait
cd build-gpu
LINK=$(ninja -t commands moebench | tail -1 | sed 's/^: && //; s/ && :$//')
for v in 0 2; do
  cp libmoe_cuda.a v$v/libmoe_cuda.a && ar r v$v/libmoe_cuda.a v$v/grouped_gemm.cu.o &&
    eval "$(echo "$LINK" | sed "s# libmoe_cuda.a # v$v/libmoe_cuda.a #; s# -o moebench # -o v$v/moebench #")"
  echo "v$v link rc=$?" >> $S
done
mkdir -p v1 && cp moebench v1/moebench
cd ..
echo "all built at $(el) s" >> $S
grep -E "bytes spill" $L/build-v2.log | sort | uniq -c >> $S
export CUDA_VISIBLE_DEVICES=0
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "all GPU tests (v1) rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests.log | head >> $S
gm() {  # v name config [more]
  local v=$1 n=$2 cfg=$3; shift 3
  timeout 60 build-gpu/v$v/moebench gemm --config configs/bench/$cfg.json --methods grouped_sm90 --iters 20 --set align=16 \
    --set expert_grad_dtype=bf16 "$@" --out $L/gemm-$n-v$v.json > $L/gemm-$n-v$v.log 2>&1
  echo "== gemm $n v$v rc=$? at $(el) s: $(grep -E '^  wgrad' $L/gemm-$n-v$v.log | awk '{printf "%s %s (%s%%)  ", $1, $7, $9}')" >> $S
}
for r in 1 2; do for v in 0 1 2; do gm $v ds-ep2 deepseek_v3 --ep 2; done; done
for r in 1 2; do for v in 0 1 2; do gm $v ds-ep1 deepseek_v3; done; done
for r in 1 2; do for v in 0 1 2; do gm $v qw qwen3_30b_a3b --set tokens_per_rank=8192; done; done
for r in 1 2; do for v in 0 1 2; do gm $v mx mixtral_8x7b --set tokens_per_rank=8192; done; done
unset CUDA_VISIBLE_DEVICES
M="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];p=t['phases']
print('step', round(t['step']['median'],3), 'fwd', round(p['experts_fwd']['median'],3), 'bwd', round(p['experts_bwd']['median'],3), 'MHz', [round(r['sm_mhz']['median']) for r in t['clocks']['ranks']])" 2>&1 | tail -1; }
go() {  # v name np config [more]
  local v=$1 n=$2 np=$3 cfg=$4; shift 4
  [ $(el) -gt 500 ] && { echo "skip $n" >> $S; return; }
  timeout 120 $M -np $np build-gpu/v$v/moebench run --config configs/bench/$cfg.json --backend cuda --set expert_grad_dtype=bf16 --set roofline=false \
    --set mesh.ep=$np --set gemm.method=grouped_sm90 --set align=16 "$@" --out $L/$n-v$v.json > $L/$n-v$v.log 2>&1
  echo "== $n v$v rc=$? at $(el) s: $(row $L/$n-v$v.json)" >> $S
  grep -E '^# check' $L/$n-v$v.log >> $S
}
go 1 chk-qw-ep2 2 qwen3_30b_a3b --set dispatch=nvlink --set check=first --steps 2 --warmup 3 --set warmup_s=0
P="--set check=off --steps 20 --warmup 8"
for r in 1 2; do for v in 0 1 2; do go $v ds-ep2-r$r 2 deepseek_v3 $P --set dispatch=nvlink; done; done
for r in 1 2; do for v in 0 1 2; do go $v qw-ep1-r$r 1 qwen3_30b_a3b $P --set graph=true; done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
