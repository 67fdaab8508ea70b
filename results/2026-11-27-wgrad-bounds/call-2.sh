#!/usr/bin/env bash
# Session 21, call 2 (1 GPU): is our weight gradient bound by L2 traffic? A throwaway runtime
# hack in the grouped kernel (env MOE_HACK_B=n: the weight gradients load B only on every n-th
# tile of a CTA, the other tiles multiply whatever B the stage holds; MOE_HACK_NOSTORE=1: no TMA
# stores of C). Results are wrong under the hack; only the times matter.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
run() {  # name, env..., then gemm args
  local n=$1; shift
  env "$@" > $L/$n.txt 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  (wgrad_out|wgrad_in) ' $L/$n.txt | awk '{printf "%s %s ms %s%%  ", $1, $6, $8}')" >> $S
}
for shape in "deepseek_v3 --ep 2" "deepseek_v3 --ep 1 --set align=16" "qwen3_30b_a3b --ep 1" "qwen3_30b_a3b --ep 1 --set tokens_per_rank=8192"; do
  set -- $shape; w=$1; shift
  G="$B gemm --config configs/bench/$w.json $* --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 20"
  echo "# $w $*" >> $S
  for r in 1 2; do
    run $w-$r-base MOE_HACK_B=1 $G
    run $w-$r-B8 MOE_HACK_B=8 $G
    run $w-$r-Bnever MOE_HACK_B=1000000 $G
    run $w-$r-nostore MOE_HACK_NOSTORE=1 $G
    run $w-$r-B8-nostore MOE_HACK_B=8 MOE_HACK_NOSTORE=1 $G
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
