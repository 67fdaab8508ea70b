#!/usr/bin/env bash
# Session 19, call 2 (2-GPU machine): the row moves reading a row once with four loads in flight;
# moebench dispatch with the peer-copy line; nvlink with the pipeline; the checks again.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader | head -2 >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 100 build-gpu/tests/moe_cuda_tests --gtest_filter='NvlinkRowMovesCuda*:*Dedup*' > $L/gpu_tests.log 2>&1
echo "gpu tests rc=$? at $(el) s" >> $S
grep -E "^\[  (PASSED|FAILED) |Failure" $L/gpu_tests.log | head -8 >> $S
B=build-gpu/moebench
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
T="--config configs/tiny.json --set check=every --steps 3 --warmup 2 --backend cuda --set mesh.ep=2 --timeout-s 60 --set dispatch=nvlink"
for v in "plain|--set align=16" "pipe4_graph|--set align=16 --set overlap=pipeline --set overlap_chunks=4 --set graph=true" "fp8tensor_k3|--set precision=fp8_tensor --set model.topk=3 --set model.hidden=256"; do
  n=${v%%|*}; a=${v#*|}
  timeout 90 $MPI $B run $T $a --out $L/tiny-$n.json > $L/tiny-$n.log 2>&1
  echo "== tiny $n rc=$? at $(el) s: $(grep -E '^# check:' $L/tiny-$n.log)" >> $S
done
timeout 200 $MPI $B dispatch --backend cuda --config configs/bench/deepseek_v3.json --set mesh.ep=2 --tokens 1024,4096,8192 --dispatchers alltoall_dedup,nvlink --out $L/dispatch.json > $L/dispatch.log 2>&1
echo "== dispatch rc=$? at $(el) s" >> $S
grep -E "^#|^  " $L/dispatch.log | grep -v "^# moebench\|^# mesh\|^# ms" >> $S
R="--backend cuda --set mesh.ep=2 --set align=16 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --steps 20 --warmup 8 --timeout-s 60"
for w in "deepseek_v3|4096" "qwen3_30b_a3b|4096"; do
  m=${w%%|*}; t=${w#*|}
  for v in "alltoall_dedup|--set dispatch=alltoall_dedup" "nvlink|--set dispatch=nvlink" "nvlink_graph|--set dispatch=nvlink --set graph=true" "nvlink_pipe2|--set dispatch=nvlink --set overlap=pipeline" "nvlink_pipe2_ctas116|--set dispatch=nvlink --set overlap=pipeline --set gemm.sm90_ctas=116" "alltoall_dedup_pipe2|--set dispatch=alltoall_dedup --set overlap=pipeline"; do
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
    lanes = t.get("lanes", {})
    print(os.path.basename(f)[5:-5], "step", round(t["step"]["median"], 3), "p90", round(t["step"]["p90"], 3), "tflops", round(r["throughput"]["tflops_per_rank"], 1), "waits", t["host"]["waits_per_step"], "issue", round(t["host"]["issue_ms"]["median"], 3), a2a, {k: round(v["median"], 3) for k, v in lanes.items() if isinstance(v, dict) and "median" in v})
PY
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
