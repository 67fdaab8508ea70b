#!/usr/bin/env bash
# Session 36, call 1 (2 H200s): the reference's wgrad scale-tie simplification under the
# pipelined Mixtral-8x7B fp8_tensor check; then a throwaway timing build of the GPU reference's
# FP8 path (devrun/fp8-ref-timing.diff) on a DeepSeek-V3 shape with 64 experts at EP 2.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
chk() {  # name lim tmo [more]
  local n=$1 lim=$2 tmo=$3; shift 3
  [ $(el) -gt $lim ] && { echo "skip $n" >> $S; return; }
  timeout $tmo mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY $B run --backend cuda --set mesh.ep=2 --set dispatch=nvlink --set align=16 --set roofline=false --set warmup_s=0 --set fp8_weights=cached --timeout-s $((tmo-10)) "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# (check|checked|fp8 scales)' $L/$n.log | tr '\n' ' ')" >> $S
  grep -E 'FAILED at step|error|fp8-ref-timing' $L/$n.log | head -6 >> $S
}
chk mx-pipe 200 130 --config bench/mixtral_8x7b --set precision=fp8_tensor --set gemm.method=lt_multistream --set overlap=pipeline --set overlap_chunks=2 --set check=first --steps 3 --warmup 1
git apply devrun/fp8-ref-timing.diff && cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build2.log 2>&1
echo "timing build rc=$? at $(el) s" >> $S
chk ds64-timing 420 150 --config bench/deepseek_v3 --set model.experts=64 --set precision=fp8_tensor --set gemm.method=grouped_sm90 --set check=first --set check_unquantized=false --steps 1 --warmup 0
git apply -R devrun/fp8-ref-timing.diff
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
