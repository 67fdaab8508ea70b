#!/usr/bin/env bash
# Session 29, call 2 (2 GPUs): does a tile's multiplying of zero rows, not another expert's rows,
# save power? align=128 pads each expert's rows with zero rows to whole 128-row tiles (no tile
# reads a neighbour's rows); align=16 is the bench default. DeepSeek-V3 EP 2 and Qwen3-30B-A3B
# EP 1, alternating; and fp8_block's GEMMs alone beside bf16's at DeepSeek-V3 EP 2.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j30 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
M="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];p=t['phases']
print('step', round(t['step']['median'],3), 'fwd', round(p['experts_fwd']['median'],3), 'bwd', round(p['experts_bwd']['median'],3), 'MHz', [round(r['sm_mhz']['median']) for r in t['clocks']['ranks']], 'W', [round(r['power_w']['median']) for r in t['clocks']['ranks']], 'tiles', d['routing'].get('tile_rows'))" 2>&1 | tail -1; }
go() {  # name np config [more]
  local n=$1 np=$2 cfg=$3; shift 3
  [ $(el) -gt 480 ] && { echo "skip $n" >> $S; return; }
  timeout 120 $M -np $np $B run --config configs/bench/$cfg.json --backend cuda --set expert_grad_dtype=bf16 --set roofline=false \
    --set mesh.ep=$np --set gemm.method=grouped_sm90 --set check=off --steps 20 --warmup 8 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
}
for r in 1 2; do
  go ds-ep2-a16-r$r 2 deepseek_v3 --set align=16 --set dispatch=nvlink
  go ds-ep2-a128-r$r 2 deepseek_v3 --set align=128 --set dispatch=nvlink
done
for r in 1 2; do
  go qw-ep1-a16-r$r 1 qwen3_30b_a3b --set align=16 --set graph=true
  go qw-ep1-a128-r$r 1 qwen3_30b_a3b --set align=128 --set graph=true
done
export CUDA_VISIBLE_DEVICES=0
for p in bf16 fp8_block; do
  timeout 60 $B gemm --config configs/bench/deepseek_v3.json --ep 2 --methods grouped_sm90 --iters 20 --set align=16 --set expert_grad_dtype=bf16 --set precision=$p --out $L/gemm-ds-ep2-$p.json > $L/gemm-ds-ep2-$p.log 2>&1
  echo "== gemm deepseek ep2 $p rc=$? at $(el) s" >> $S
  grep -E '^  [a-z]|^# clocks' $L/gemm-ds-ep2-$p.log >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
