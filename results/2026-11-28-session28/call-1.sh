#!/usr/bin/env bash
# Session 28, call 1 (2 GPUs): main (5218e9d, "base", built from devrun/base) GPU tests and
# Qwen3-30B-A3B balanced check at EP 2 (nvlink, graph), as promised by session 27; the candidate
# (deferred bf16 weight-gradient stores, "new"; and "v1", the same with one staging box per
# warpgroup, 8 stages): all GPU tests, the same check, moebench gemm base/new/v1 alternating.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
( cmake -S devrun/base -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-base.log 2>&1 &&
  cmake --build build-base -j10 --target moebench moe_cuda_tests > $L/build-base.log 2>&1; echo "base build rc=$? at $(el) s" >> $S ) &
( cmake -S . -B build-v1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DMOE_EXP_BOXES=1 -DBUILD_TESTING=OFF > $L/cmake-v1.log 2>&1 &&
  cmake --build build-v1 -j10 --target moebench > $L/build-v1.log 2>&1; echo "v1 build rc=$? at $(el) s" >> $S ) &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j12 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
export CUDA_VISIBLE_DEVICES=0
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests-new.log 2>&1
echo "new: all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests-new.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests-new.log | head >> $S
wait
echo "all built at $(el) s" >> $S
timeout 200 build-base/tests/moe_cuda_tests --gtest_filter='DispatchCuda*:*Reference*' > $L/tests-base.log 2>&1
echo "base: GPU tests DispatchCuda*:*Reference* rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests-base.log | tr '\n' ' ')" >> $S
unset CUDA_VISIBLE_DEVICES
chk() {  # bin tag
  local n=check-$2
  timeout 200 mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    $1 run --config configs/bench/qwen3_30b_a3b.json --backend cuda --set mesh.ep=2 --set dispatch=nvlink \
    --set graph=true --set expert_placement=balanced --set check=first --steps 2 --warmup 3 --set warmup_s=0 \
    --set roofline=false --set align=16 --set expert_grad_dtype=bf16 --set gemm.method=grouped_sm90 --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# (check|routing)' $L/$n.log | tr '\n' ' ')" >> $S
  python3 -c "import json;d=json.load(open('$L/$n.json'));print('  digests', {k:v for k,v in d.get('digests',{}).items()})" >> $S 2>&1
}
chk build-base/moebench base
chk build-gpu/moebench new
export CUDA_VISIBLE_DEVICES=0
G="--methods grouped_sm90 --iters 20 --set precision=bf16 --set expert_grad_dtype=bf16"
run() {  # bin tag config ep [more]
  local b=$1 t=$2 cfg=$3 ep=$4; shift 4
  local n=$t-$(basename $cfg .json)-ep$ep-r$r
  [ $(el) -gt 540 ] && { echo "skip $n" >> $S; return; }
  timeout 60 $b gemm --config $cfg --ep $ep $G "$@" > $L/$n.log 2>&1
  echo "$n rc=$? $(grep -E '^  (wgrad|up|dgrad_x)' $L/$n.log | awk '{printf "%s %s | ", $1, $6}')" >> $S
}
for r in 1 2; do
  for cfg in "configs/bench/deepseek_v3.json 2" "configs/bench/deepseek_v3.json 1 --set align=16" "configs/bench/qwen3_30b_a3b.json 1" "configs/bench/mixtral_8x7b.json 1"; do
    set -- $cfg
    run build-base/moebench base "$@"
    run build-gpu/moebench new "$@"
    run build-v1/moebench v1 "$@"
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
