#!/usr/bin/env bash
# Session 15, call 3 (one H200): a's transposed FP8 codes kept from the forward for wgrad_out (tree)
# against HEAD (the commit before it, built from old.tgz). GPU tests, tiny checks (both recipes, the
# pipeline and shared experts), the Qwen3-30B-A3B FP8 check, then same-call steps: Mixtral-8x7B
# bf16 / fp8_tensor / fp8_block and DeepSeek-V3 fp8_tensor, each old then new (Mixtral's bf16 and fp8_tensor twice).
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs old
S="$OUT/summary.txt"
tar xzf devrun/old.tgz -C old
(cmake -S old -B old/build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake_old.log 2>&1 && cmake --build old/build-gpu -j8 --target moebench > /tmp/build_old.log 2>&1) &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j8 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
wait
[ -x old/build-gpu/moebench ] || { tail -30 /tmp/build_old.log; exit 1; }
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception" $OUT/logs/gpu_tests.txt | head -20 >> $S
grep -E "ExpertFfnFp8Cuda" $OUT/logs/gpu_tests.txt | grep OK >> $S
B="build-gpu/moebench run --config configs/tiny.json --backend cuda --set align=16 --steps 3"
for p in fp8_tensor:grouped_sm90:none fp8_tensor:lt_multistream:pipeline fp8_tensor:grouped_sm90:pipeline fp8_block:auto:pipeline fp8_block:auto:none; do
  IFS=: read pr m ov <<< "$p"
  n=tiny_${pr}_${m}_$ov
  timeout 60 $B --set precision=$pr --set gemm.method=$m --set overlap=$ov --set model.shared_experts=1 --set model.shared_ffn=48 > $OUT/logs/$n.log 2>&1; echo "== $n rc=$? $(grep -E '^# check' $OUT/logs/$n.log)" >> $S
done
timeout 150 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=256 --set gemm.method=grouped_sm90 --set check=first --steps 2 --warmup 1 --backend cuda --set align=16 --set precision=fp8_tensor > $OUT/logs/qwen3_check.log 2>&1; echo "== qwen3 check fp8_tensor grouped_sm90 rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out) |^# check" $OUT/logs/qwen3_check.log >> $S
run() {  # build name workload precision
  timeout 120 $1/moebench run --config configs/bench/$3.json --set tokens_per_rank=8192 --set precision=$4 --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 6 > $OUT/logs/$2_$3_$4.log 2>&1
  echo "== $2 $3 $4 rc=$? $(grep -E '^  step ' $OUT/logs/$2_$3_$4.log | tr -s ' ' | cut -d' ' -f2-5) | experts_bwd $(grep -E '^  experts_bwd' $OUT/logs/$2_$3_$4.log | tr -s ' ' | cut -d' ' -f3) | $(grep -E 'memory: high' $OUT/logs/$2_$3_$4.log | cut -c1-50)" >> $S
}
for w in 1:mixtral_8x7b:bf16 1:mixtral_8x7b:fp8_tensor 1:mixtral_8x7b:fp8_block 1:deepseek_v3:fp8_tensor 2:mixtral_8x7b:bf16 2:mixtral_8x7b:fp8_tensor; do
  IFS=: read rep m pr <<< "$w"
  [ $(( $(date +%s) - START )) -lt 540 ] || break
  run old/build-gpu old$rep $m $pr
  run build-gpu new$rep $m $pr
done
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
