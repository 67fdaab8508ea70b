#!/usr/bin/env bash
# Session 33, call 2 (2 H200s): two stages' MMAs in flight on the bf16 row GEMMs only (the tree,
# v1) against main 95ff298 (v0, devrun/base_grouped_gemm.cu): GPU tests on v1; the GEMMs alone on
# DeepSeek-V3's EP 2 routed rows; steps at EP 2 (nvlink) and EP 1, alternating; checks on v1.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > $L/cmake.log 2>&1
CMD=$(python3 -c "
import json
for e in json.load(open('build-gpu/compile_commands.json')):
    if e['file'].endswith('kernels/cuda/grouped_gemm.cu'): print(e['command'].split(' -c ')[0])")
mkdir -p build-gpu/v0 build-gpu/v1
( cd build-gpu && eval "$CMD -c $PWD/../devrun/base_grouped_gemm.cu -o v0/grouped_gemm.cu.o" > $L/build-v0.log 2>&1 ) &
cmake --build build-gpu -j32 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
wait
cd build-gpu
LINK=$(ninja -t commands moebench | tail -1 | sed 's/^: && //; s/ && :$//')
cp moebench v1/moebench
cp libmoe_cuda.a v0/libmoe_cuda.a && ar r v0/libmoe_cuda.a v0/grouped_gemm.cu.o &&
  eval "$(echo "$LINK" | sed "s# libmoe_cuda.a # v0/libmoe_cuda.a #; s# -o moebench # -o v0/moebench #")"
echo "v0 link rc=$? at $(el) s" >> $S
cd ..
CUDA_VISIBLE_DEVICES=0 timeout 120 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "all GPU tests (v1) rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests.log | head >> $S
gm() {  # v name [more]
  local v=$1 n=$2; shift 2
  [ $(el) -gt 250 ] && { echo "skip $n v$v" >> $S; return; }
  CUDA_VISIBLE_DEVICES=0 timeout 40 build-gpu/v$v/moebench gemm --methods grouped_sm90 --iters 20 --set align=16 --set expert_grad_dtype=bf16 "$@" --out $L/gemm-$n-v$v.json > $L/gemm-$n-v$v.log 2>&1
  echo "== gemm $n v$v rc=$? at $(el) s: $(grep -E '^  [a-z]' $L/gemm-$n-v$v.log | grep -v dense | awk '{printf "%s %s  ", $1, $6}')" >> $S
}
for r in 1 2; do for v in 0 1; do gm $v ds2-routed-r$r --config configs/bench/deepseek_v3.json --ep 2 --rows routed; done; done
row() { python3 - "$1" <<'PY' 2>&1 | tail -1
import json, sys
d = json.load(open(sys.argv[1])); t = d["timing"]; p = t["phases"]
cl = [round(r["sm_mhz"]["median"]) for r in t.get("clocks", {}).get("ranks", [])]
print("step", round(t["step"]["median"], 3), "TFLOP/s", round(d["throughput"]["tflops_per_rank"], 1),
      "experts", round(p["experts_fwd"]["median"], 3), round(p["experts_bwd"]["median"], 3), "clocks", cl)
PY
}
go() {  # v np name config [more]
  local v=$1 np=$2 n=$3 cfg=$4; shift 4
  [ $(el) -gt 540 ] && { echo "skip $n v$v" >> $S; return; }
  timeout 60 mpirun --allow-run-as-root -np $np -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    build-gpu/v$v/moebench run -q --config $cfg --backend cuda --set expert_grad_dtype=bf16 --set roofline=false --set align=16 \
    --set check=off --steps 20 --warmup 8 --set warmup_s=2 --timeout-s 40 "$@" --out $L/$n-v$v.json > $L/$n-v$v.log 2>&1
  echo "== $n v$v rc=$? at $(el) s: $(row $L/$n-v$v.json)" >> $S
}
DS="bench/deepseek_v3 --set gemm.method=grouped_sm90"
MX="bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=grouped_sm90"
QW="bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set graph=true"
for r in 1 2; do
  for v in 0 1; do go $v 2 ds-ep2-r$r $DS --set mesh.ep=2 --set dispatch=nvlink; done
  for v in 1 0; do go $v 2 qw-ep2-r$r $QW --set mesh.ep=2 --set dispatch=nvlink; done
  for v in 0 1; do go $v 1 qw-ep1-r$r $QW; done
  for v in 1 0; do go $v 2 mx-ep2-r$r $MX --set mesh.ep=2 --set dispatch=nvlink; done
done
chk() {  # name np [more]
  local n=$1 np=$2; shift 2
  [ $(el) -gt 560 ] && { echo "skip $n" >> $S; return; }
  timeout 45 mpirun --allow-run-as-root -np $np -x NCCL_NVLS_ENABLE=0 build-gpu/v1/moebench run -q --backend cuda --set align=16 --steps 3 --warmup 2 --set warmup_s=0 --set gemm.method=grouped_sm90 --set check=first --timeout-s 40 "$@" > $L/chk-$n.log 2>&1
  echo "== check $n v1 rc=$? at $(el) s: $(grep -E '^# check:' $L/chk-$n.log)" >> $S
}
chk qw-ep2-nvlink-graph 2 --config bench/qwen3_30b_a3b --set mesh.ep=2 --set dispatch=nvlink --set graph=true
chk mx-ep2 2 --config bench/mixtral_8x7b --set mesh.ep=2 --set dispatch=nvlink
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
