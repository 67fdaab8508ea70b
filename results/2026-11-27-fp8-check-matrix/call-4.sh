#!/usr/bin/env bash
# Session 23, call 4 (2 GPUs, warm after call 3): the last FP8 check of the matrix:
# DeepSeek-V3 fp8_tensor at EP 2 (dispatch nvlink), bf16 expert gradients, fp8_weights cached.
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
n=check-ep2-deepseek_v3-fp8_tensor
/usr/bin/time -v timeout 450 $MPI build-gpu/moebench run --config configs/bench/deepseek_v3.json $CHK --set mesh.ep=2 --set dispatch=nvlink --set precision=fp8_tensor --set gemm.method=grouped_sm90 --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s: $(grep -E '^# check:|^# correctness|Elapsed' $L/$n.log | tr '\n' ' ')" >> $S
grep -E '^  (out|dx|dw_gate|dw_in|dw_out|dw_sh_in|dw_sh_out|loss) |routing  ' $L/$n.log >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
