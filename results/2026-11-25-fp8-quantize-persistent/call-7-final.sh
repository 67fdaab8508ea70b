#!/usr/bin/env bash
# Session 12, call 7 (one H200): the final tree (packed load phase). GPU tests; the step's check in FP8 (Qwen3-30B-A3B
# 256 tokens, tiny shapes); gemm.method auto with the default warm-up (steps added for the tries);
# the three bench workloads in bf16, fp8_tensor and fp8_block (EP 1, bf16 grads, default warm-up,
# median of 20).
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
B=build-gpu/moebench
chk() { n=$1; shift; timeout 280 $B run "$@" --backend cuda --set align=16 --set check=first --steps 2 --warmup 1 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out|dw_sh_in|dw_sh_out) |check:" $OUT/logs/$n.log >> $S; }
chk qwen_fp8_tensor --config configs/bench/qwen3_30b_a3b.json --set precision=fp8_tensor --set tokens_per_rank=256 &
chk qwen_fp8_block --config configs/bench/qwen3_30b_a3b.json --set precision=fp8_block --set tokens_per_rank=256 &
timeout 250 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "all gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Which is|mismatch" $OUT/logs/gpu_tests.txt | head >> $S
for p in fp8_tensor fp8_block; do
  timeout 60 $B run --config configs/tiny.json --backend cuda --set align=16 --set precision=$p --set model.hidden=256 --set model.ffn=160 --set tokens_per_rank=256 --steps 2 --warmup 1 > $OUT/logs/tiny_$p.log 2>&1
  echo "== tiny_$p rc=$? $(grep -E '^# check' $OUT/logs/tiny_$p.log)" >> $S
  timeout 60 $B run --config configs/tiny.json --backend cuda --set align=16 --set precision=$p --set model.hidden=256 --set model.ffn=160 --set model.shared_experts=2 --set model.shared_ffn=128 --set overlap=pipeline --set tokens_per_rank=256 --steps 2 --warmup 1 > $OUT/logs/tinysh_$p.log 2>&1
  echo "== tiny shared+pipeline $p rc=$? $(grep -E '^# check' $OUT/logs/tinysh_$p.log)" >> $S
done
timeout 60 $B run --config configs/tiny.json --backend cuda --steps 3 -o $OUT/logs/tiny_auto.json > $OUT/logs/tiny_auto.log 2>&1
echo "== tiny bf16 auto, default warm-up rc=$? $(grep -E '^# check' $OUT/logs/tiny_auto.log)" >> $S; grep -E "added|expert GEMMs|warm-up \+" $OUT/logs/tiny_auto.log >> $S
wait
tim() { n=$1; shift; [ $(( $(date +%s) - START )) -gt 530 ] && { echo "$n skipped (deadline)" >> $S; return; }
  timeout 100 $B run "$@" --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^# expert GEMMs|^  step |^  experts_fwd|^  experts_bwd|rror" $OUT/logs/$n.log | cut -c1-150 >> $S; }
for w in mixtral_8x7b:8192 qwen3_30b_a3b:8192 deepseek_v3:4096; do
  IFS=: read c t <<< "$w"
  for p in bf16 fp8_tensor fp8_block; do tim ${c}_$p --config configs/bench/$c.json --set precision=$p --set tokens_per_rank=$t; done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
