#!/usr/bin/env bash
# Session 44 call 4 (one H200): main with the stmatrix epilogue (e3aa255, 34eb8c7) on every bench
# workload at EP 1, as README's headline table runs them (bf16 expert gradients, align 16,
# gemm.method auto, 20 timed steps after 5 s of settling): the check first (graph and not), then
# two rounds of timed steps.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
find app core kernels comm dispatch tests -type f \( -name "*.cu" -o -name "*.cpp" -o -name "*.h" -o -name "*.cuh" \) -exec touch {} +
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j$(nproc) --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
MB=build-gpu/moebench
K="--set expert_grad_dtype=bf16 --set align=16 --set roofline=false"
for c in "qw graph bench/qwen3_30b_a3b true" "ds graph bench/deepseek_v3 true" "mx nograph bench/mixtral_8x7b false" "ds nograph bench/deepseek_v3 false"; do
  set -- $c
  timeout 150 $MB run --backend cuda --config $3 $K --set graph=$4 --set check=first --set warmup_s=0 --steps 2 --warmup 2 --out $L/check-$1-$2.json > $L/check-$1-$2.log 2>&1
  echo "check $1 $2 rc=$? at $(el) s: $(grep -E '^# (check|expert GEMMs)' $L/check-$1-$2.log | tr '\n' ' ')" >> $S
done
for r in 1 2; do for w in qw ds mx qw8; do
  [ $(el) -gt 500 ] && break 2
  case $w in
    qw) a="--config bench/qwen3_30b_a3b --set graph=true";;
    ds) a="--config bench/deepseek_v3";;
    mx) a="--config bench/mixtral_8x7b --set tokens_per_rank=8192";;
    qw8) a="--config bench/qwen3_30b_a3b --set tokens_per_rank=8192";;
  esac
  timeout 60 $MB run --backend cuda $a $K --set check=off --set warmup_s=5 --steps 20 --warmup 5 --out $L/$w-$r.json > $L/$w-$r.log 2>&1
  echo "== $w round $r rc=$? at $(el) s: $(grep -E '^  step ' $L/$w-$r.log | awk '{print $1, $2}') $(grep -oE '[0-9.]+ TFLOP/s per rank' $L/$w-$r.log) $(grep -E '^# expert GEMMs' $L/$w-$r.log | cut -c1-40) $(grep -oE 'SM [0-9]+ MHz' $L/$w-$r.log | head -1)" >> $S
done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
