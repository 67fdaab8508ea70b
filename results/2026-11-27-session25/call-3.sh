#!/usr/bin/env bash
# Session 25, call 3 (one H100): narrow last M tiles in the row GEMMs (bf16 and FP8 on 256
# columns). Base 7c4486b built beside the tree. All GPU tests; moebench gemm on balanced rows
# (no narrow tiles: the tree must be level); steps with the bench workloads' learned routing
# (skewed: narrow tiles), base against tree, two rounds; Qwen3-30B-A3B's check on the tree.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
mkdir -p /tmp/base && tar xf devrun/base.tar -C /tmp/base
( cmake -S /tmp/base -B /tmp/base/build -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-base.log 2>&1 &&
  cmake --build /tmp/base/build -j6 --target moebench > $L/build-base.log 2>&1; echo "base build rc=$? at $(el) s" >> $S ) &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j10 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests_all.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_all.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|NarrowLastTiles' $L/tests_all.log | head >> $S
wait
echo "all built at $(el) s" >> $S
G="--methods grouped_sm90 --iters 10 --set align=16 --set expert_grad_dtype=bf16"
run() {  # bin tag config ep precision
  local n=$2-$(basename $3 .json)-ep$4-$5
  timeout 60 $1 gemm --config $3 --ep $4 $G --set precision=$5 > $L/$n.log 2>&1
  echo "$n rc=$? $(grep -E '^  (wgrad|up|down|dgrad)' $L/$n.log | tail -6 | head -4 | awk '{printf "%s %s | ", $1, $6}')" >> $S
}
run /tmp/base/build/moebench base configs/bench/deepseek_v3.json 2 fp8_block
run build-gpu/moebench new configs/bench/deepseek_v3.json 2 fp8_block
n=check-qwen3-bf16
timeout 100 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --backend cuda --set check=first --steps 1 --warmup 1 --set roofline=false --set align=16 --set expert_grad_dtype=bf16 --set gemm.method=grouped_sm90 --out $L/$n.json > $L/$n.log 2>&1
echo "== $n rc=$? at $(el) s: $(grep -E '^# check:' $L/$n.log)" >> $S
STEP="--backend cuda --set check=off --set roofline=false --steps 10 --warmup 3 --set align=16 --set expert_grad_dtype=bf16 --set gemm.method=grouped_sm90"
step() {  # bin tag config precision
  local n=step-$2-$(basename $3 .json)-$4-r$r
  [ $(el) -gt 560 ] && { echo "skip $n" >> $S; return; }
  local extra=""; [ "$4" != bf16 ] && extra="--set precision=$4 --set fp8_weights=cached"
  timeout 60 $1 run --config $3 $STEP $extra --out $L/$n.json > $L/$n.log 2>&1
  echo "$n rc=$? $(python3 -c "import json;d=json.load(open('$L/$n.json'));t=d['timing'];print('step', round(t['step']['median'],3), ' '.join(k+' '+str(round(v['median'],3)) for k,v in t.get('phases',{}).items() if k.startswith('experts')))" 2>&1 | tail -1)" >> $S
}
for r in 1 2; do
  for spec in "configs/bench/qwen3_30b_a3b.json bf16" "configs/bench/qwen3_30b_a3b.json fp8_block" "configs/bench/deepseek_v3.json bf16" "configs/bench/deepseek_v3.json fp8_block"; do
    set -- $spec
    step /tmp/base/build/moebench base $1 $2
    step build-gpu/moebench new $1 $2
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
