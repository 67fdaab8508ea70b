#!/usr/bin/env bash
# Session 36, call 5 (one H200): the reference router's normalization backward in the form that
# cancels exactly for one selected expert (CPU fuzzing found `topk 1` with `normalize_topk`
# failing dw_gate at 100% on rounding noise): that shape on the CUDA backend against the GPU
# reference, bf16 and fp8_tensor, and Qwen3-30B-A3B (normalize_topk, top-8) checked; the final
# tree's FP8 roofline line.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
run() {  # name [more]
  local n=$1; shift
  timeout 60 $B run --backend cuda --set align=16 --steps 2 --warmup 1 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s" >> $S
  grep -E '^  dw_gate|^# check|^# roofline|error' $L/$n.log >> $S
}
K1="--config tiny --set model.hidden=256 --set model.ffn=128 --set model.experts=8 --set model.topk=1 --set tokens_per_rank=256 --set router.normalize_topk=true --set check=first"
run k1-bf16 $K1
run k1-fp8 $K1 --set precision=fp8_tensor
run k1-sigmoid $K1 --set router.score=sigmoid
run qw-check --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set check=first --set roofline=false
run qw-fp8-roofline --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set check=off --set precision=fp8_block
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
