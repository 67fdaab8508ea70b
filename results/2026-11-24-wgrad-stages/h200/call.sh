#!/usr/bin/env bash
# Session 9, call 7 (one H200): the GPU tests, the expert GEMMs against torch._grouped_mm and the
# step at f345ad1 (32-row weight-gradient stages).
set -uo pipefail
T0=$(date +%s)
L=$(mktemp -d)
S=$OUT/summary.txt
nvidia-smi --query-gpu=name --format=csv,noheader > $S
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 && cmake --build build-gpu -j16 > $L/build.log 2>&1 ) || { grep -E "error" -A3 $L/build.log | head -40 >> $S; cat $S; exit 1; }
echo "built in $(( $(date +%s) - T0 )) s" >> $S
timeout 300 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1; rc=$?
echo "gpu tests rc=$rc $(grep -E '^\[  (FAILED|PASSED) ' $L/tests.log | tr '\n' ' ')" >> $S
B=build-gpu/moebench
for spec in "qwen3_30b_a3b 1 8192" "deepseek_v3 2 4096" "mixtral_8x7b 1 8192"; do
  set -- $spec
  timeout 150 $B gemm --config configs/bench/$1.json --ep $2 --set tokens_per_rank=$3 --set expert_grad_dtype=bf16 --iters 20 -o $L/gemm_$1.json > $L/gemm_$1.txt 2>&1; echo "== gemm $spec rc=$?" >> $S; grep -v "^# gemm" $L/gemm_$1.txt >> $S
  timeout 120 python3 scripts/torch_grouped_mm.py configs/bench/$1.json --ep $2 --tokens $3 --grad-dtype bf16 --iters 20 > $L/torch_$1.txt 2>&1; echo "== torch rc=$?" >> $S; grep -v "^#" $L/torch_$1.txt >> $S
done
run() { local n=$1 cfg=$2; shift 2
  timeout 150 $B run --config configs/bench/$cfg.json --set expert_grad_dtype=bf16 "$@" -o $L/$n.json > $L/$n.log 2>&1
  echo "$n rc=$? $(grep -E '^ *(experts_fwd|experts_bwd|step) ' $L/$n.log | awk '{printf "%s %s | ", $1, $2}') $(grep -o "[0-9.]* TFLOP/s per rank (model" $L/$n.log) $(grep -o "chosen in warm-up[^)]*)" $L/$n.log | head -1)" >> $S
}
echo "== steps after $(( $(date +%s) - T0 )) s" >> $S
for cfg in qwen3_30b_a3b mixtral_8x7b; do
  for m in lt_multistream grouped_sm90 auto; do run ${cfg}_8k_$m $cfg --set gemm.method=$m --set tokens_per_rank=8192 --steps 20 --warmup 8; done
done
for m in lt_multistream grouped_sm90; do run deepseek_v3_$m deepseek_v3 --set gemm.method=$m --steps 20 --warmup 5; done
echo "all done after $(( $(date +%s) - T0 )) s" >> $S
cd $L && rm -f build.log && tar czf $OUT/s9e.tgz .
cat $S
