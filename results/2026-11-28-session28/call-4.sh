#!/usr/bin/env bash
# Session 28, call 4 (2 GPUs): main as landed (the clocks line in run and gemm, the weight
# gradients' evict_first stores): all GPU tests, Qwen3-30B-A3B's balanced check at EP 2;
# moebench gemm's clocks; issue 16's Mixtral-8x7B bf16 against fp8_tensor at EP 2 with the clocks;
# and where fp8_tensor's expert phases spend their time (ncu, one step at EP 1).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j30 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
export CUDA_VISIBLE_DEVICES=0
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests.log | head >> $S
timeout 60 $B gemm --config configs/bench/deepseek_v3.json --ep 2 --methods grouped_sm90 --iters 20 --set expert_grad_dtype=bf16 --out $L/gemm-deepseek-ep2.json > $L/gemm-deepseek-ep2.log 2>&1
echo "== gemm deepseek ep2 rc=$? at $(el) s" >> $S
grep -E '^  (up|wgrad)|^# clocks' $L/gemm-deepseek-ep2.log >> $S
unset CUDA_VISIBLE_DEVICES
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];p=t['phases'];c=t['clocks']
print('step', round(t['step']['median'],3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1), 'experts', round(p['experts_fwd']['median'],3), round(p['experts_bwd']['median'],3))" 2>&1 | tail -1; }
go() {  # name np config [more]
  local n=$1 np=$2 cfg=$3; shift 3
  [ $(el) -gt 400 ] && { echo "skip $n" >> $S; return; }
  local dev=0; [ $np -eq 2 ] && dev=0,1
  timeout 150 mpirun --allow-run-as-root -np $np -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY -x CUDA_VISIBLE_DEVICES=$dev \
    $B run --config configs/bench/$cfg.json --backend cuda --set expert_grad_dtype=bf16 --set roofline=false \
    --set align=16 --set mesh.ep=$np "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (clocks|check|warning|lanes)' $L/$n.log >> $S
}
go check-qwen3-ep2-bal 2 qwen3_30b_a3b --set gemm.method=grouped_sm90 --set dispatch=nvlink --set graph=true --set expert_placement=balanced --set check=first --steps 2 --warmup 3 --set warmup_s=0
P="--set check=off --steps 20 --warmup 8 --set tokens_per_rank=8192 --set dispatch=nvlink --set gemm.method=lt_multistream"
go mixtral-ep2-bf16 2 mixtral_8x7b $P
go mixtral-ep2-fp8t 2 mixtral_8x7b $P --set precision=fp8_tensor --set fp8_weights=cached
export CUDA_VISIBLE_DEVICES=0
timeout 200 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
  $B run --config configs/bench/mixtral_8x7b.json --backend cuda --set expert_grad_dtype=bf16 --set roofline=false --set align=16 \
  --set check=off --set tokens_per_rank=8192 --set gemm.method=lt_multistream --set precision=fp8_tensor --set fp8_weights=cached \
  --set warmup_s=0 --steps 1 --warmup 3 --profile > $L/mixtral-fp8t-ncu.csv 2> $L/mixtral-fp8t-ncu.err
echo "== mixtral fp8_tensor ep1 ncu rc=$? at $(el) s" >> $S
python3 devrun/ncu_sum.py $L/mixtral-fp8t-ncu.csv 30 >> $S 2>&1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
