#!/usr/bin/env bash
# Session 31, call 1 (nvidia-h200-x2): main at e1391f7 on H200s for the first time since
# 2026-11-25: all GPU tests; the bench steps at EP 2 and EP 1 (bf16 and FP8); the dispatcher x
# schedule comparison at EP 2 (issue 14); moebench dispatch against peer copies (issue 15).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader >> $S
nvidia-smi topo -m | head -3 >> $S
NG=$(nvidia-smi -L | wc -l)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
CUDA_VISIBLE_DEVICES=0 timeout 150 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests.log | head >> $S
row() { python3 - "$1" <<'PY' 2>&1 | tail -1
import json, sys
d = json.load(open(sys.argv[1])); t = d["timing"]; p = t["phases"]
a2a = round(sum(v["median"] for k, v in p.items() if k.startswith("a2a_")), 3)
cl = [round(r["sm_mhz"]["median"]) for r in t.get("clocks", {}).get("ranks", [])]
print("step", round(t["step"]["median"], 3), "TFLOP/s", round(d["throughput"]["tflops_per_rank"], 1),
      "experts", round(p["experts_fwd"]["median"], 3), round(p["experts_bwd"]["median"], 3), "a2a", a2a, "clocks", cl)
PY
}
go() {  # np name config [more]
  local np=$1 n=$2 cfg=$3; shift 3
  [ $(el) -gt 540 ] && { echo "skip $n" >> $S; return; }
  timeout 100 mpirun --allow-run-as-root -np $np -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    $B run -q --config $cfg --backend cuda --set expert_grad_dtype=bf16 --set roofline=false --set align=16 \
    --set check=off --steps 20 --warmup 8 --timeout-s 60 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (warning)' $L/$n.log | head -2 >> $S
}
DS="bench/deepseek_v3 --set gemm.method=grouped_sm90"
MX="bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=lt_multistream"
QW="bench/qwen3_30b_a3b --set gemm.method=grouped_sm90"
# (1) the step table at EP 2 (nvlink) and EP 1
go 2 ds-ep2 $DS --set mesh.ep=2 --set dispatch=nvlink
go 2 ds-ep2-fp8b $DS --set mesh.ep=2 --set dispatch=nvlink --set precision=fp8_block --set fp8_weights=cached
go 2 mx-ep2 $MX --set mesh.ep=2 --set dispatch=nvlink
go 2 mx-ep2-fp8t $MX --set mesh.ep=2 --set dispatch=nvlink --set precision=fp8_tensor --set fp8_weights=cached
go 2 qw-ep2-graph $QW --set mesh.ep=2 --set dispatch=nvlink --set graph=true
go 1 qw-ep1-graph $QW --set graph=true
go 1 qw8k-ep1 $QW --set tokens_per_rank=8192
go 1 mx-ep1 $MX
go 1 mx-ep1-fp8t $MX --set precision=fp8_tensor --set fp8_weights=cached
# (2) dispatcher x schedule at EP 2
for w in DS MX QW; do
  for d in alltoall alltoall_dedup allgather nvlink; do
    for o in none pipeline; do
      go 2 cmp-$w-$d-$o ${!w} --set mesh.ep=2 --set dispatch=$d --set overlap=$o
    done
  done
done
# (3) the nvlink dispatcher's row moves against peer copies and NCCL
timeout 90 mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 $B dispatch --backend cuda --config bench/deepseek_v3 --set mesh.ep=2 \
  --tokens 1024,4096,8192 --dispatchers alltoall_dedup,nvlink --out $L/dispatch.json > $L/dispatch.log 2>&1
echo "== dispatch rc=$? at $(el) s" >> $S
grep -E "^#|^  " $L/dispatch.log | grep -v "^# moebench\|^# mesh" | head -40 >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
