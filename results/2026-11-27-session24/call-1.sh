#!/usr/bin/env bash
# Session 24, call 1 (2 GPUs): GPU-run session 23's host-side commits. All GPU tests on GPU 0
# beside DeepSeek-V3's FP8 check at EP 1 on GPU 1 (host memory, reference time), then the same
# check at EP 2 (dispatch nvlink; the references split by expert: about half of 277 s expected).
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
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
CHK="--backend cuda --set check=first --steps 1 --warmup 1 --set roofline=false --set align=16 --set fp8_weights=cached --set expert_grad_dtype=bf16 --set precision=fp8_block --set gemm.method=grouped_sm90"
( CUDA_VISIBLE_DEVICES=0 timeout 300 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
  echo "GPU tests (all) rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S ) &
n=check-ep1-deepseek_v3-fp8_block
CUDA_VISIBLE_DEVICES=1 /usr/bin/time -v timeout 330 build-gpu/moebench run --config configs/bench/deepseek_v3.json $CHK --timeout-s 150 --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s: $(grep -E '^# check:|^# correctness|Maximum resident|User time|Elapsed' $L/$n.log | tr '\n' ' ')" >> $S
grep -E '^  (out|dx|dw_gate|dw_in|dw_out|dw_sh_in|dw_sh_out|loss) |routing|reference|check: the' $L/$n.log >> $S
wait
grep -E 'FAILED' $L/tests.log | head -20 >> $S
n=check-ep2-deepseek_v3-fp8_block
left=$(( 585 - $(el) ))
if [ $left -gt 150 ]; then
  MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
  /usr/bin/time -v timeout $left $MPI build-gpu/moebench run --config configs/bench/deepseek_v3.json $CHK --timeout-s 150 --set mesh.ep=2 --set dispatch=nvlink --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# check:|^# correctness|Maximum resident|User time|Elapsed' $L/$n.log | tr '\n' ' ')" >> $S
  grep -E '^  (out|dx|dw_gate|dw_in|dw_out|dw_sh_in|dw_sh_out|loss) |routing|reference|check: the' $L/$n.log >> $S
else echo "== $n skipped: $left s left" >> $S; fi
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
