#!/usr/bin/env bash
# Session 30, call 4 (1 GPU): our grouped kernel against torch._grouped_mm on the bench workloads'
# shapes, balanced rows and the step's routed rows (scripts/torch_grouped_mm.py --rows-from, the
# rows moebench gemm timed), bf16 weight gradients. Alternating rounds.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
python3 -c "import torch; print('torch', torch.__version__)" >> $S 2>&1
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j16 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
pair() {  # name rows config [more]
  local n=$1 rows=$2 cfg=$3; shift 3
  [ $(el) -gt 480 ] && { echo "skip $n" >> $S; return; }
  timeout 90 $B gemm --config $cfg --methods grouped_sm90 --iters 20 --set align=16 --set expert_grad_dtype=bf16 --rows $rows "$@" --out $L/ours-$n.json > $L/ours-$n.log 2>&1
  echo "== ours $n rc=$? at $(el) s: $(grep -E '^# [a-z].* at ep' $L/ours-$n.log | cut -c1-110)" >> $S
  grep -E '^  [a-z]' $L/ours-$n.log | awk '{printf "%s %s %s (%s)  ", $1, $2, $6, $8}' >> $S; echo >> $S
  timeout 120 python3 scripts/torch_grouped_mm.py --rows-from $L/ours-$n.json --grad-dtype bf16 --iters 20 > $L/torch-$n.log 2>&1
  echo "== torch $n rc=$? at $(el) s" >> $S
  grep -E '^  [a-z]' $L/torch-$n.log | awk '{printf "%s %s  ", $1, $6}' >> $S; echo >> $S
}
for r in 1 2; do
  pair ds-ep2-bal-r$r balanced bench/deepseek_v3 --ep 2
  pair ds-ep2-routed-r$r routed bench/deepseek_v3 --ep 2
done
pair qw-bal balanced bench/qwen3_30b_a3b
pair qw-routed routed bench/qwen3_30b_a3b
pair qw8k-bal balanced bench/qwen3_30b_a3b --set tokens_per_rank=8192
pair qw8k-routed routed bench/qwen3_30b_a3b --set tokens_per_rank=8192
pair mx-bal balanced bench/mixtral_8x7b --set tokens_per_rank=8192
pair mx-routed routed bench/mixtral_8x7b --set tokens_per_rank=8192
pair ds-ep1-routed routed bench/deepseek_v3
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
