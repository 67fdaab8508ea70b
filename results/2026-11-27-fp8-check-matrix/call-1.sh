#!/usr/bin/env bash
# Session 23, call 1 (1 GPU): the GPU reference's host passes in threads. GPU tests of the
# references and FP8; Mixtral-8x7B fp8_tensor with fp8_weights cached (the report's quantization
# line, 4b09c54); then DeepSeek-V3's bench workload at EP 1 checked in fp8_block by the GPU
# reference (bf16 expert gradients).
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
timeout 120 build-gpu/tests/moe_cuda_tests --gtest_filter='*Reference*:*Fp8*' > $L/tests.log 2>&1
echo "GPU tests (Reference, Fp8) rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
n=mixtral-fp8_tensor-cached
timeout 90 build-gpu/moebench run --config configs/bench/mixtral_8x7b.json --backend cuda --steps 5 --warmup 2 --set roofline=false --set precision=fp8_tensor --set fp8_weights=cached --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s: $(grep -iE 'quantiz' $L/$n.log | tr '\n' ' ')" >> $S
python3 -c "import json;d=json.load(open('$L/$n.json'));print('json fp8_weight_quantize_ms', d['timing'].get('fp8_weight_quantize_ms'), 'step median', d['timing']['step']['median'])" >> $S 2>&1
n=check-deepseek_v3-fp8_block
left=$(( 570 - $(el) ))
/usr/bin/time -v timeout $left build-gpu/moebench run --config configs/bench/deepseek_v3.json --backend cuda --set check=first --steps 1 --warmup 1 --set roofline=false --timeout-s 120 --set align=16 --set expert_grad_dtype=bf16 --set fp8_weights=cached --set precision=fp8_block --set gemm.method=grouped_sm90 --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s: $(grep -E '^# check:|^# correctness|Maximum resident|User time|Elapsed' $L/$n.log | tr '\n' ' ')" >> $S
grep -E '^  (out|dx|dw_gate|dw_in|dw_out|dw_sh_in|dw_sh_out|loss) |routing|reference' $L/$n.log >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
