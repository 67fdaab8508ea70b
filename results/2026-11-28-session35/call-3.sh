#!/usr/bin/env bash
# Session 35, call 3 (2 H200s): call 2's DeepSeek-V3 fp8_tensor check at EP 2 with room for its
# two references (about 140 s each) and one GEMM method (no auto warm-up).
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
chk() {  # name lim tmo [more]
  local n=$1 lim=$2 tmo=$3; shift 3
  [ $(el) -gt $lim ] && { echo "skip $n" >> $S; return; }
  timeout $tmo mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY $B run --backend cuda --set mesh.ep=2 --set dispatch=nvlink --set align=16 --set roofline=false --set warmup_s=0 --set fp8_weights=cached --timeout-s $((tmo-10)) "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# (check|checked|fp8 scales)' $L/$n.log | tr '\n' ' ')" >> $S
  grep -E 'FAILED at step|error' $L/$n.log | head -5 >> $S
}
chk ds-tensor 200 420 --config bench/deepseek_v3 --set precision=fp8_tensor --set gemm.method=grouped_sm90 --set check=first --steps 2 --warmup 1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
