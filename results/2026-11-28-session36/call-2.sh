#!/usr/bin/env bash
# Session 36, call 2 (2 H200s): the GPU reference's FP8 weights made and quantized on the device
# (reference_quantize_weight) and its host passes in threads: the reference GPU tests, then the
# DeepSeek-V3 FP8 checks of call 1 and of session 35 call 3 again, timed (reference_seconds) and
# compared tensor by tensor with those runs (same seed, same steps: the same figures expected).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 120 build-gpu/tests/moe_cuda_tests --gtest_filter='ReferenceCuda*' > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Which is|Expected' $L/tests.log | head -20 >> $S
B=build-gpu/moebench
chk() {  # name lim tmo [more]
  local n=$1 lim=$2 tmo=$3; shift 3
  [ $(el) -gt $lim ] && { echo "skip $n" >> $S; return; }
  timeout $tmo mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY $B run --backend cuda --set mesh.ep=2 --set dispatch=nvlink --set align=16 --set roofline=false --set warmup_s=0 --set fp8_weights=cached --timeout-s $((tmo-10)) "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# (check|checked|fp8 scales)' $L/$n.log | tr '\n' ' ') ref_s $(grep -o '"reference_seconds": [0-9.]*' $L/$n.json | tr '\n' ' ')" >> $S
  grep -E 'FAILED at step|error' $L/$n.log | head -6 >> $S
}
chk ds64 240 150 --config bench/deepseek_v3 --set model.experts=64 --set precision=fp8_tensor --set gemm.method=grouped_sm90 --set check=first --set check_unquantized=false --steps 1 --warmup 1
chk ds-tensor 300 250 --config bench/deepseek_v3 --set precision=fp8_tensor --set gemm.method=grouped_sm90 --set check=first --steps 2 --warmup 1
chk ds-block 450 250 --config bench/deepseek_v3 --set precision=fp8_block --set gemm.method=grouped_sm90 --set check=first --steps 2 --warmup 1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
