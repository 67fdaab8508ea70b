#!/usr/bin/env bash
# Session 16, call 6 (one H200): the review mend (the weight scales' tile row passed from the quantizer,
# grouped_sm90_fp8 without the redundant recipe argument, one dispatched-row-bytes fact). GPU tests,
# tiny fp8_block checks on the grouped kernel (with and without graph, dispatch fp8, the pipeline),
# Qwen3-30B-A3B at 256 tokens in the sync-free step, and one fp8_block gemm table.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception" $OUT/logs/gpu_tests.txt | head -20 >> $S
grep -E "largest error" $OUT/logs/gpu_tests.txt | grep -E "^  block" | sort -k7 -g | tail -2 >> $S
B="build-gpu/moebench run --config configs/tiny.json --backend cuda --set precision=fp8_block --set align=16 --steps 4 --warmup 2 --set check=every"
for v in "gemm.method=grouped_sm90" "graph=true" "gemm.method=grouped_sm90 --set overlap=pipeline" "graph=true --set dispatch_dtype=fp8" "gemm.method=lt_multistream --set dispatch_dtype=fp8 --set dispatch=alltoall_dedup"; do
  n=tiny_$(echo $v | tr -c 'a-z0-9_\n' '_')
  timeout 60 $B --set $v > $OUT/logs/$n.log 2>&1; echo "== $v rc=$? $(grep -E '^# check' $OUT/logs/$n.log)" >> $S
  grep -E "^  (out|dx|dw_in|dw_out) " $OUT/logs/$n.log | tr -s ' ' | tr '\n' ';' >> $S; echo >> $S
done
timeout 200 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=256 --set check=first --steps 2 --warmup 2 --backend cuda --set align=16 --set precision=fp8_block --set graph=true > $OUT/logs/qwen3_check.log 2>&1; echo "== qwen3 check fp8_block graph rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out) |^# check" $OUT/logs/qwen3_check.log >> $S
timeout 90 build-gpu/moebench gemm --config configs/bench/deepseek_v3.json --ep 2 --set tokens_per_rank=4096 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_block --methods grouped_sm90 --iters 10 > $OUT/logs/gemm.log 2>&1; echo "== gemm deepseek_v3 ep 2 fp8_block rc=$?" >> $S
grep -E "fp8_block:" $OUT/logs/gemm.log | awk '{print $1, $6}' | tr '\n' ' ' >> $S; echo >> $S
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
