#!/usr/bin/env bash
# Session 17, call 4 (one H200): gemm.method_<gemm> keys. GPU tests; the step's check with GEMMs
# pinned to different methods (bf16 against the GPU reference, fp8_block and fp8_tensor against the
# float64 one); DeepSeek-V3 bf16 with auto, then rerun with its per_gemm choice pinned by keys.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1; echo "new rc=$?" >> $S
grep -B2 -A10 " error" /tmp/build.log | head -30 >> $S
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception" $OUT/logs/gpu_tests.txt | head -20 >> $S
echo "tests at $(( $(date +%s) - START )) s" >> $S
Q="--config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=256 --backend cuda --set align=16 --set check=every --steps 2 --warmup 2"
MIX="--set gemm.method=grouped_sm90 --set gemm.method_up=lt_multistream --set gemm.method_dgrad_x=lt_multistream --set gemm.method_wgrad_in=lt_multistream"
chk() {
  n=$1; shift
  timeout 220 build-gpu/moebench run "$@" --out $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S
  grep -E '^# expert GEMMs|^# knobs' $OUT/logs/$n.log | cut -c1-300 >> $S
  grep -E "^  (out|dx|dw_in|dw_out) |checks? (passed|FAILED)|PASS|FAIL" $OUT/logs/$n.log | head -8 >> $S
}
chk qwen3_bf16_mix $Q $MIX --set gemm.method_wgrad_out=grouped_batched --set gemm.method_down=grouped_batched --set reference=gpu
chk qwen3_fp8_block_mix $Q $MIX --set precision=fp8_block
echo "checks at $(( $(date +%s) - START )) s" >> $S
D="--config configs/bench/deepseek_v3.json --set tokens_per_rank=4096 --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 10"
timeout 110 build-gpu/moebench run $D --out $OUT/logs/ds_auto.json > $OUT/logs/ds_auto.log 2>&1; echo "== ds_auto rc=$?" >> $S
grep -E '^# expert GEMMs|^  step |^  experts_' $OUT/logs/ds_auto.log | cut -c1-500 >> $S
PIN=$(python3 -c "
import json; g=json.load(open('$OUT/logs/ds_auto.json'))['gemm']; t=g['warmup_per_gemm']
base=t['against']; print('--set gemm.method=%s' % base + ''.join(' --set gemm.method_%s=%s' % (k, v) for k, v in g['methods'].items() if v != base))")
echo "pinned: $PIN" >> $S
timeout 110 build-gpu/moebench run $D $PIN --out $OUT/logs/ds_pinned.json > $OUT/logs/ds_pinned.log 2>&1; echo "== ds_pinned rc=$?" >> $S
grep -E '^# expert GEMMs|^# knobs|^  step |^  experts_' $OUT/logs/ds_pinned.log | cut -c1-500 >> $S
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
