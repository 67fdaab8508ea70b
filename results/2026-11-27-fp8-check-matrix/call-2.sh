#!/usr/bin/env bash
# Session 23, call 2 (2 GPUs): the FP8 check by the GPU reference at EP 2 (dispatch nvlink) on
# the bench workloads at 4096 tokens, both recipes, bf16 expert gradients, fp8_weights cached:
# DeepSeek-V3 first (the longest), then Qwen3-30B-A3B and Mixtral-8x7B, each while time is left.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
nproc >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
CHK="--backend cuda --set check=first --steps 1 --warmup 1 --set roofline=false --timeout-s 150 --set align=16 --set fp8_weights=cached --set expert_grad_dtype=bf16 --set mesh.ep=2 --set dispatch=nvlink"
for spec in "deepseek_v3 fp8_block grouped_sm90 300" "qwen3_30b_a3b fp8_block grouped_sm90 60" "qwen3_30b_a3b fp8_tensor grouped_sm90 60" "mixtral_8x7b fp8_tensor lt_multistream 110" "mixtral_8x7b fp8_block lt_multistream 110"; do
  set -- $spec
  left=$(( 585 - $(el) ))
  [ $left -lt $4 ] && { echo "== $1 $2 skipped: $left s left" >> $S; continue; }
  n=check-ep2-$1-$2
  /usr/bin/time -v timeout $left $MPI build-gpu/moebench run --config configs/bench/$1.json $CHK --set precision=$2 --set gemm.method=$3 --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# check:|^# correctness|Maximum resident|Elapsed' $L/$n.log | tr '\n' ' ')" >> $S
  grep -E '^  (out|dx|dw_gate|dw_in|dw_out|dw_sh_in|dw_sh_out|loss) |routing  ' $L/$n.log >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
