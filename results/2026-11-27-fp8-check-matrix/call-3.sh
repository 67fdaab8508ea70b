#!/usr/bin/env bash
# Session 23, call 3 (2 GPUs, warm after call 2): the FP8 checks call 2 had no time for:
# Mixtral-8x7B fp8_block at EP 2 (dispatch nvlink), then DeepSeek-V3 fp8_tensor at EP 1 (one of
# the two GPUs), bf16 expert gradients, fp8_weights cached.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
CHK="--backend cuda --set check=first --steps 1 --warmup 1 --set roofline=false --timeout-s 150 --set align=16 --set fp8_weights=cached --set expert_grad_dtype=bf16"
n=check-ep2-mixtral_8x7b-fp8_block
/usr/bin/time -v timeout 150 $MPI build-gpu/moebench run --config configs/bench/mixtral_8x7b.json $CHK --set mesh.ep=2 --set dispatch=nvlink --set precision=fp8_block --set gemm.method=lt_multistream --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s: $(grep -E '^# check:|^# correctness|Elapsed' $L/$n.log | tr '\n' ' ')" >> $S
grep -E '^  (out|dx|dw_gate|dw_in|dw_out|dw_sh_in|dw_sh_out|loss) |routing  ' $L/$n.log >> $S
n=check-ep1-deepseek_v3-fp8_tensor
left=$(( 585 - $(el) ))
CUDA_VISIBLE_DEVICES=0 /usr/bin/time -v timeout $left build-gpu/moebench run --config configs/bench/deepseek_v3.json $CHK --set precision=fp8_tensor --set gemm.method=grouped_sm90 --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s: $(grep -E '^# check:|^# correctness|Maximum resident|Elapsed|User time' $L/$n.log | tr '\n' ' ')" >> $S
grep -E '^  (out|dx|dw_gate|dw_in|dw_out|dw_sh_in|dw_sh_out|loss) |routing  ' $L/$n.log >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
