#!/usr/bin/env bash
# Session 24, call 5 (2 GPUs): the final tree (FP8 tiles 256 wide but in fp8_block's row GEMMs).
# All GPU tests on GPU 0 beside DeepSeek-V3's fp8_block check at EP 1 on GPU 1 (the wide weight
# gradients on its shapes); then issue 16's EP 2 figures: bf16 against FP8 (fp8_weights cached)
# on the three bench workloads, dispatch nvlink, bf16 expert gradients.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
( CUDA_VISIBLE_DEVICES=0 timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
  echo "GPU tests (all) rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S ) &
n=check-ep1-deepseek_v3-fp8_block
CUDA_VISIBLE_DEVICES=1 /usr/bin/time -v timeout 300 build-gpu/moebench run --config configs/bench/deepseek_v3.json --backend cuda --set check=first --steps 1 --warmup 1 --set roofline=false --set align=16 --set fp8_weights=cached --set expert_grad_dtype=bf16 --set precision=fp8_block --set gemm.method=grouped_sm90 --timeout-s 150 --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s: $(grep -E '^# check:|^# correctness|Maximum resident|Elapsed' $L/$n.log | tr '\n' ' ')" >> $S
grep -E '^  (out|dx|dw_gate|dw_in|dw_out|dw_sh_in|dw_sh_out|loss) |routing  ' $L/$n.log >> $S
wait
grep -E '^\[  FAILED' $L/tests.log | head >> $S
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing']['phases']
print('step', round(d['timing']['step']['median'],3), ' '.join(k+' '+str(round(t[k]['median'],3)) for k in ('experts_fwd','experts_bwd','shared_fwd','shared_bwd') if k in t), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1))" 2>&1 | tail -1; }
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60 --steps 12 --warmup 3 --set align=16 --set mesh.ep=2 --set dispatch=nvlink"
for spec in "deepseek_v3 4096 grouped_sm90 bf16" "deepseek_v3 4096 grouped_sm90 fp8_block" "mixtral_8x7b 8192 lt_multistream bf16" "mixtral_8x7b 8192 lt_multistream fp8_tensor" "mixtral_8x7b 8192 grouped_sm90 fp8_tensor" "qwen3_30b_a3b 4096 grouped_sm90 bf16" "qwen3_30b_a3b 4096 grouped_sm90 fp8_block"; do
  set -- $spec
  [ $(el) -gt 560 ] && { echo "skip $spec" >> $S; continue; }
  P=""; [ $4 != bf16 ] && P="--set precision=$4 --set fp8_weights=cached"
  n=$1-$3-$4
  timeout 90 $MPI build-gpu/moebench run --config configs/bench/$1.json $COMMON --set tokens_per_rank=$2 --set gemm.method=$3 $P --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
