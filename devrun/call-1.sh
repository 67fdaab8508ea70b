#!/usr/bin/env bash
# Session 19, call 1 (2-GPU machine), commit b32176e: dispatch nvlink on GPUs for the first time.
# The row moves' kernels against their CPU twins; the check at EP 2 (tiny: plain, pipeline,
# graph, FP8 dispatch); digests against alltoall_dedup on a bench workload; step timings against
# the other dispatchers; moebench dispatch.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -2 >> $S
nvidia-smi topo -m | head -4 >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
grep -E "error" $L/build.log | head -5 >> $S
timeout 100 build-gpu/tests/moe_cuda_tests --gtest_filter='NvlinkRowMovesCuda*:*Dedup*' > $L/gpu_tests.log 2>&1
echo "gpu tests rc=$? at $(el) s" >> $S
grep -E "^\[  (PASSED|FAILED) |Failure" $L/gpu_tests.log | head -8 >> $S
B=build-gpu/moebench
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
T="--config configs/tiny.json --set check=every --steps 3 --warmup 2 --backend cuda --set mesh.ep=2 --timeout-s 60 --set dispatch=nvlink"
for v in "plain|--set align=16" "pipe4|--set align=16 --set overlap=pipeline --set overlap_chunks=4" "graph|--set align=16 --set graph=true" "fp8disp_capacity|--set align=16 --set precision=fp8_block --set dispatch_dtype=fp8 --set model.hidden=256 --set capacity_factor=1.0"; do
  n=${v%%|*}; a=${v#*|}
  timeout 90 $MPI $B run $T $a --out $L/tiny-$n.json > $L/tiny-$n.log 2>&1
  echo "== tiny $n rc=$? at $(el) s: $(grep -E '^# check:' $L/tiny-$n.log)" >> $S
  grep -E "error|trap|moebench:" $L/tiny-$n.log | head -3 >> $S
done
# A bench workload checked by the GPU reference, nvlink against dedup: digests.
Q="--config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=2048 --backend cuda --set mesh.ep=2 --set align=16 --steps 3 --warmup 2 --timeout-s 60 --set check=first"
for d in alltoall_dedup nvlink; do
  timeout 150 $MPI $B run $Q --set dispatch=$d --out $L/qwen-$d.json > $L/qwen-$d.log 2>&1
  echo "== qwen check $d rc=$? at $(el) s: $(grep -E '^# check:' $L/qwen-$d.log)" >> $S
done
python3 - $L >> $S <<'PY'
import json, sys
a, b = (json.load(open(f"{sys.argv[1]}/qwen-{d}.json"))["digests"] for d in ("alltoall_dedup", "nvlink"))
print("qwen digests equal:", a == b, {k: (a[k], b[k]) for k in a if a[k] != b[k]})
PY
# Step timings, bf16 expert gradients, median of 20 steps.
R="--backend cuda --set mesh.ep=2 --set align=16 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --steps 20 --warmup 8 --timeout-s 60"
for w in "deepseek_v3|4096" "qwen3_30b_a3b|4096" "mixtral_8x7b|8192"; do
  m=${w%%|*}; t=${w#*|}
  for v in "alltoall_dedup|" "allgather|" "nvlink|" "nvlink_graph|--set graph=true"; do
    n=${v%%|*}; a=${v#*|}; d=${n%_graph}
    timeout 150 $MPI $B run --config configs/bench/$m.json --set tokens_per_rank=$t $R --set dispatch=$d $a --out $L/step-$m-$n.json > $L/step-$m-$n.log 2>&1
    echo "== step $m $n rc=$? at $(el) s" >> $S
  done
done
python3 - $L >> $S <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(f"{sys.argv[1]}/step-*.json")):
    r = json.load(open(f)); t = r["timing"]; ph = t["phases"]
    a2a = {k[4:]: round(v["median"], 3) for k, v in ph.items() if k.startswith("a2a_")}
    print(os.path.basename(f)[5:-5], "step", round(t["step"]["median"], 3), "tflops", round(r["throughput"]["tflops_per_rank"], 1), "host", t["host"], a2a)
PY
timeout 120 $MPI $B dispatch --backend cuda --config configs/bench/deepseek_v3.json --set mesh.ep=2 --tokens 1024,4096 --out $L/dispatch.json > $L/dispatch.log 2>&1
echo "== dispatch rc=$? at $(el) s" >> $S
grep -E "^#|^  " $L/dispatch.log | head -50 >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
