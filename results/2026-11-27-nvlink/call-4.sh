#!/usr/bin/env bash
# Session 19, call 4 (4-GPU machine): rows_to_sources interleaved over the sources; the row
# moves' GPU test, the check and digests at EP 4, moebench dispatch and the steps again.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader | head -4 >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 100 build-gpu/tests/moe_cuda_tests --gtest_filter='NvlinkRowMovesCuda*' > $L/gpu_tests.log 2>&1
echo "gpu tests rc=$? at $(el) s" >> $S
grep -E "^\[  (PASSED|FAILED) |Failure" $L/gpu_tests.log | head -8 >> $S
B=build-gpu/moebench
MPI="mpirun --allow-run-as-root -np 4 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
timeout 90 $MPI $B run --config configs/tiny.json --set check=every --steps 3 --warmup 2 --backend cuda --timeout-s 60 --set dispatch=nvlink --set align=16 --set mesh.ep=4 --out $L/tiny.json > $L/tiny.log 2>&1
echo "== tiny ep4 rc=$? at $(el) s: $(grep -E '^# check:' $L/tiny.log)" >> $S
Q="--config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=2048 --backend cuda --set mesh.ep=4 --set align=16 --steps 3 --warmup 2 --timeout-s 60 --set check=first"
for d in alltoall_dedup nvlink; do
  timeout 150 $MPI $B run $Q --set dispatch=$d --out $L/qwen-$d.json > $L/qwen-$d.log 2>&1
  echo "== qwen ep4 check $d rc=$? at $(el) s: $(grep -E '^# check:' $L/qwen-$d.log)" >> $S
done
python3 - $L >> $S <<'PY'
import json, sys
a, b = (json.load(open(f"{sys.argv[1]}/qwen-{d}.json"))["digests"] for d in ("alltoall_dedup", "nvlink"))
print("qwen ep4 digests equal:", a == b, {k: (a[k], b[k]) for k in a if a[k] != b[k]})
PY
timeout 200 $MPI $B dispatch --backend cuda --config configs/bench/deepseek_v3.json --set mesh.ep=4 --tokens 1024,4096 --dispatchers alltoall_dedup,nvlink --out $L/dispatch.json > $L/dispatch.log 2>&1
echo "== dispatch rc=$? at $(el) s" >> $S
grep -E "^#|^  " $L/dispatch.log | grep -v "^# moebench\|^# mesh\|^# ms" >> $S
R="--backend cuda --set mesh.ep=4 --set align=16 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --steps 20 --warmup 8 --timeout-s 60"
for w in "deepseek_v3|4096" "qwen3_30b_a3b|4096"; do
  m=${w%%|*}; t=${w#*|}
  for v in "alltoall_dedup|--set dispatch=alltoall_dedup" "nvlink|--set dispatch=nvlink" "nvlink_graph|--set dispatch=nvlink --set graph=true"; do
    n=${v%%|*}; a=${v#*|}
    timeout 150 $MPI $B run --config configs/bench/$m.json --set tokens_per_rank=$t $R $a --out $L/step-$m-$n.json > $L/step-$m-$n.log 2>&1
    echo "== step $m $n rc=$? at $(el) s" >> $S
  done
done
python3 - $L >> $S <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(f"{sys.argv[1]}/step-*.json")):
    r = json.load(open(f)); t = r["timing"]; ph = t["phases"]
    a2a = {k[4:]: round(v["median"], 3) for k, v in ph.items() if k.startswith("a2a_")}
    print(os.path.basename(f)[5:-5], "step", round(t["step"]["median"], 3), "p90", round(t["step"]["p90"], 3), "tflops", round(r["throughput"]["tflops_per_rank"], 1), "waits", t["host"]["waits_per_step"], "issue", round(t["host"]["issue_ms"]["median"], 3), a2a)
PY
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
