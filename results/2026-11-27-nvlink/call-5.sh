#!/usr/bin/env bash
# Session 19, call 5 (2-GPU machine): issue 15's done-when on the bench workloads as committed
# (4096 tokens per rank): the check with dispatch nvlink, graph false and true, on 2 GPUs (EP 2)
# and on 1 (EP 1), and the digests of the graph run against the run issued call by call.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader | head -2 >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
for np in 2 1; do
  MPI="mpirun --allow-run-as-root -np $np -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
  for m in qwen3_30b_a3b mixtral_8x7b deepseek_v3; do
    for g in false true; do
      n=$m-np$np-graph$g
      timeout 200 $MPI $B run --config configs/bench/$m.json --backend cuda --set mesh.ep=$np --set align=16 --set dispatch=nvlink --set graph=$g --set check=first --steps 3 --warmup 2 --set roofline=false --timeout-s 90 --out $L/$n.json > $L/$n.log 2>&1
      echo "== $n rc=$? at $(el) s: $(grep -E '^# check:' $L/$n.log) $(grep -E 'error:' $L/$n.log | head -1)" >> $S
    done
    python3 - $L $m-np$np >> $S <<'PY'
import json, sys
try:
    a, b = (json.load(open(f"{sys.argv[1]}/{sys.argv[2]}-graph{g}.json")) for g in ("false", "true"))
    print(sys.argv[2], "graph digests equal:", a["digests"] == b["digests"], "waits/step", a["timing"]["host"]["waits_per_step"], b["timing"]["host"]["waits_per_step"], "step ms", round(a["timing"]["step"]["median"], 3), round(b["timing"]["step"]["median"], 3))
except Exception as e:
    print(sys.argv[2], "no comparison:", e)
PY
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
