#!/usr/bin/env bash
# Session 31, call 2 (nvidia-h200; x2 no longer lent): the bench workloads checked with dispatch nvlink and
# graph true at EP 1 and EP 2 (digests against the same run without graphs); then our grouped
# kernel against torch._grouped_mm on the bench shapes (balanced and routed rows) on one H200.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > $L/cmake.log 2>&1 && cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
# chk np gpus name config [more]: graph+check run, then the same without graph, digests compared
chk() {
  local np=$1 g=$2 n=$3 cfg=$4; shift 4
  local C="--config $cfg --backend cuda --set align=16 --steps 3 --warmup 2 --set warmup_s=0 --timeout-s 300 --set gemm.method=auto"
  CUDA_VISIBLE_DEVICES=$g timeout 280 mpirun --allow-run-as-root -np $np -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    $B run $C "$@" --set graph=true --set check=first --out $L/chk-$n.json > $L/chk-$n.log 2>&1
  local rc=$?
  CUDA_VISIBLE_DEVICES=$g timeout 100 mpirun --allow-run-as-root -np $np -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    $B run $C "$@" --set graph=false --set check=off --out $L/nog-$n.json > $L/nog-$n.log 2>&1
  local rc2=$?
  echo "== check $n rc=$rc/$rc2 at $(el) s: $(grep -E '^# check:' $L/chk-$n.log) $(grep -E '^# (expert GEMMs|reference)' $L/chk-$n.log | head -2 | tr '\n' ' ') digests equal: $(python3 -c "
import json; a=json.load(open('$L/chk-$n.json'))['digests']; b=json.load(open('$L/nog-$n.json'))['digests']; print(a==b, {k:(a[k],b[k]) for k in a if a[k]!=b[k]})" 2>&1 | tail -1)" >> $S
}
chk 1 0 qw-ep1 bench/qwen3_30b_a3b
chk 1 0 mx-ep1 bench/mixtral_8x7b
# GEMMs: ours against torch._grouped_mm, one GPU, alternating rounds
export CUDA_VISIBLE_DEVICES=0
pair() {  # name rows config [more]
  local n=$1 rows=$2 cfg=$3; shift 3
  [ $(el) -gt 320 ] && { echo "skip $n" >> $S; return; }
  timeout 90 $B gemm --config $cfg --methods grouped_sm90 --iters 20 --set align=16 --set expert_grad_dtype=bf16 --rows $rows "$@" --out $L/ours-$n.json > $L/ours-$n.log 2>&1
  echo "== ours $n rc=$? at $(el) s: $(grep -E '^# [a-z].* at ep' $L/ours-$n.log | cut -c1-110)" >> $S
  grep -E '^  [a-z]' $L/ours-$n.log | awk '{printf "%s %s %s (%s)  ", $1, $2, $6, $8}' >> $S; echo >> $S
  timeout 120 python3 scripts/torch_grouped_mm.py --rows-from $L/ours-$n.json --grad-dtype bf16 --iters 20 > $L/torch-$n.log 2>&1
  echo "== torch $n rc=$? at $(el) s" >> $S
  grep -E '^  [a-z]' $L/torch-$n.log | awk '{printf "%s %s  ", $1, $6}' >> $S; echo >> $S
}
pair ds-ep2-bal balanced bench/deepseek_v3 --ep 2
pair ds-ep2-routed routed bench/deepseek_v3 --ep 2
pair qw8k-bal balanced bench/qwen3_30b_a3b --set tokens_per_rank=8192
pair qw8k-routed routed bench/qwen3_30b_a3b --set tokens_per_rank=8192
pair mx-bal balanced bench/mixtral_8x7b --set tokens_per_rank=8192
pair mx-routed routed bench/mixtral_8x7b --set tokens_per_rank=8192
pair ds-ep2-bal-r2 balanced bench/deepseek_v3 --ep 2
pair ds-ep2-routed-r2 routed bench/deepseek_v3 --ep 2
pair qw-routed routed bench/qwen3_30b_a3b
pair ds-ep1-routed routed bench/deepseek_v3
[ $(el) -lt 330 ] && chk 1 0 ds-ep1 bench/deepseek_v3 --set expert_grad_dtype=bf16
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
