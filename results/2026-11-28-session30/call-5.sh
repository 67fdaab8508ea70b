#!/usr/bin/env bash
# Session 30, call 5 (1 GPU, asked as nvidia-h200): the one-GPU targets of issues 15, 16 and 18 at
# main: Qwen3-30B-A3B at 4096 tokens with graphs; Qwen3-30B-A3B and Mixtral-8x7B at 8192 tokens in
# bf16 (auto) and Mixtral-8x7B in fp8_tensor; on an H200 also the GEMM tables against torch.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j16 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];p=t['phases']
print('step', round(t['step']['median'],3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1), 'experts', round(p['experts_fwd']['median'],3), round(p['experts_bwd']['median'],3), 'clocks', [round(r['sm_mhz']['median']) for r in t['clocks']['ranks']], 'methods', d.get('gemm',{}).get('methods'))" 2>&1 | tail -1; }
go() {  # name config [more]
  local n=$1 cfg=$2; shift 2
  [ $(el) -gt 420 ] && { echo "skip $n" >> $S; return; }
  timeout 150 $B run --config $cfg --backend cuda --set expert_grad_dtype=bf16 --set roofline=false --set align=16 \
    --set check=off --steps 20 --warmup 8 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
}
for r in 1 2; do go qw-graph-r$r bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set graph=true; done
go qw8k-auto bench/qwen3_30b_a3b --set tokens_per_rank=8192 --set gemm.method=auto
go mx8k-auto bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=auto
go mx8k-fp8t bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=auto --set precision=fp8_tensor --set fp8_weights=cached
go mx8k-auto-r2 bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=auto
if [[ "$GPU" == *H200* ]]; then
  pair() {  # name rows config [more]
    local n=$1 rows=$2 cfg=$3; shift 3
    [ $(el) -gt 480 ] && { echo "skip $n" >> $S; return; }
    timeout 90 $B gemm --config $cfg --methods grouped_sm90 --iters 20 --set align=16 --set expert_grad_dtype=bf16 --rows $rows "$@" --out $L/ours-$n.json > $L/ours-$n.log 2>&1
    echo "== ours $n rc=$? at $(el) s" >> $S
    grep -E '^  [a-z]' $L/ours-$n.log | awk '{printf "%s %s (%s)  ", $1, $6, $8}' >> $S; echo >> $S
    timeout 120 python3 scripts/torch_grouped_mm.py --rows-from $L/ours-$n.json --grad-dtype bf16 --iters 20 > $L/torch-$n.log 2>&1
    echo "== torch $n rc=$? at $(el) s" >> $S
    grep -E '^  [a-z]' $L/torch-$n.log | awk '{printf "%s %s  ", $1, $6}' >> $S; echo >> $S
  }
  pair ds-ep2-bal balanced bench/deepseek_v3 --ep 2
  pair ds-ep2-routed routed bench/deepseek_v3 --ep 2
  pair qw8k-bal balanced bench/qwen3_30b_a3b --set tokens_per_rank=8192
  pair mx-bal balanced bench/mixtral_8x7b --set tokens_per_rank=8192
fi
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
