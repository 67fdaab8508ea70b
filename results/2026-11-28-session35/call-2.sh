#!/usr/bin/env bash
# Session 35, call 2 (2 H200s): fp8-scale-ties at EP 2 -- the fp8_tensor check with the scales
# reported by both ranks (Mixtral every step, pipelined chunks, DeepSeek-V3, Qwen3 with graphs),
# and fp8_block beside it.
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
chk mx-every 150 170 --config bench/mixtral_8x7b --set precision=fp8_tensor --set check=every --steps 4 --warmup 1
chk mx-pipe 300 120 --config bench/mixtral_8x7b --set precision=fp8_tensor --set overlap=pipeline --set overlap_chunks=2 --set check=first --steps 3 --warmup 1
chk ds-tensor 380 130 --config bench/deepseek_v3 --set precision=fp8_tensor --set check=first --steps 3 --warmup 1
chk qw-tensor-graph 480 60 --config bench/qwen3_30b_a3b --set precision=fp8_tensor --set graph=true --set check=first --steps 3 --warmup 2
chk ds-block 520 70 --config bench/deepseek_v3 --set precision=fp8_block --set check=first --steps 3 --warmup 1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
