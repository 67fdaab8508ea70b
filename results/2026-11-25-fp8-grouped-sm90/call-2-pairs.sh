#!/usr/bin/env bash
# Session 13, call 2 (one H200): FP8 stages in pairs (two partial sums, no wait per stage).
# GPU tests; `moebench gemm` fp8_tensor per method, cluster 1 and 2; steps vs 4c1fc28 (old/).
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs old
S="$OUT/summary.txt"
tar xzf devrun/old.tgz -C old
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j10 > /tmp/build.log 2>&1 ) &
( cd old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake-old.log 2>&1 && cmake --build build-gpu -j6 --target moebench > /tmp/build-old.log 2>&1 ) &
wait
[ -x build-gpu/tests/moe_cuda_tests ] || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 150 build-gpu/tests/moe_cuda_tests --gtest_filter='*Fp8*:*GroupedGemm*' > $OUT/logs/fp8_tests.txt 2>&1; echo "fp8+grouped gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/fp8_tests.txt | tr '\n' ' ')" >> $S
grep -E "FAILED|Failure|largest error|got .* want" $OUT/logs/fp8_tests.txt | head -30 >> $S
for w in mixtral_8x7b:8192:1 qwen3_30b_a3b:8192:1 deepseek_v3:4096:2; do
  IFS=: read c t ep <<< "$w"
  for cl in 1 2; do
    n=gemm_${c}_fp8_tensor_c$cl
    timeout 80 build-gpu/moebench gemm --config configs/bench/$c.json --ep $ep --set tokens_per_rank=$t --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --set gemm.sm90_cluster=$cl --methods lt_multistream,grouped_sm90 --iters 10 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1
    echo "== $n rc=$?" >> $S; grep -E "grouped_sm90|dense" $OUT/logs/$n.log | grep -v wgrad | cut -c1-110 >> $S
  done
done
echo "at $(( $(date +%s) - START )) s" >> $S
tim() { b=$1; n=$2; shift 2; [ $(( $(date +%s) - START )) -gt 530 ] && { echo "$n skipped (deadline)" >> $S; return; }
  timeout 100 $b/moebench run "$@" --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 5 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^  step |^  experts_fwd|^  experts_bwd|expert GEMMs:|rror" $OUT/logs/$n.log >> $S; }
for w in qwen3_30b_a3b:8192 mixtral_8x7b:8192 deepseek_v3:4096; do
  IFS=: read c t <<< "$w"
  tim build-gpu ${c}_fp8_tensor_sm90 --config configs/bench/$c.json --set precision=fp8_tensor --set tokens_per_rank=$t --set gemm.method=grouped_sm90
  tim build-gpu ${c}_bf16 --config configs/bench/$c.json --set tokens_per_rank=$t --set gemm.method=grouped_sm90
  tim old/build-gpu old_${c}_bf16 --config configs/bench/$c.json --set tokens_per_rank=$t --set gemm.method=grouped_sm90
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
