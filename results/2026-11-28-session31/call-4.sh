#!/usr/bin/env bash
# Session 31, call 4 (nvidia-h200-x2): the bench workloads checked at EP 2 with dispatch nvlink and
# graph true (digests against the same run without graphs); DeepSeek-V3 at EP 2: balanced
# placement, and FP8 dispatch against bf16 dispatch under fp8_block.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
chk() {  # name config [more]
  local n=$1 cfg=$2; shift 2
  local C="--config $cfg --backend cuda --set mesh.ep=2 --set dispatch=nvlink --set align=16 --steps 3 --warmup 2 --set warmup_s=0 --timeout-s 300 --set gemm.method=auto"
  timeout 330 $MPI $B run $C "$@" --set graph=true --set check=first --out $L/chk-$n.json > $L/chk-$n.log 2>&1
  local rc=$?
  timeout 100 $MPI $B run $C "$@" --set graph=false --set check=off --out $L/nog-$n.json > $L/nog-$n.log 2>&1
  local rc2=$?
  echo "== check $n rc=$rc/$rc2 at $(el) s: $(grep -E '^# check:' $L/chk-$n.log) $(grep -E '^# (expert GEMMs|host)' $L/chk-$n.log | cut -c1-150 | tr '\n' ' ') digests equal: $(python3 -c "
import json; a=json.load(open('$L/chk-$n.json'))['digests']; b=json.load(open('$L/nog-$n.json'))['digests']; print(a==b, {k:(a[k],b[k]) for k in a if a[k]!=b[k]})" 2>&1 | tail -1)" >> $S
}
chk qw bench/qwen3_30b_a3b
chk mx bench/mixtral_8x7b
row() { python3 - "$1" <<'PY' 2>&1 | tail -1
import json, sys
d = json.load(open(sys.argv[1])); t = d["timing"]; p = t["phases"]
a2a = {k[4:]: round(v["median"], 3) for k, v in p.items() if k.startswith("a2a_")}
cl = [round(r["sm_mhz"]["median"]) for r in t.get("clocks", {}).get("ranks", [])]
print("step", round(t["step"]["median"], 3), "TFLOP/s", round(d["throughput"]["tflops_per_rank"], 1),
      "experts", round(p["experts_fwd"]["median"], 3), round(p["experts_bwd"]["median"], 3), "dispatch_fwd", round(p["dispatch_fwd"]["median"], 3), a2a, "clocks", cl)
PY
}
go() {  # name [more]
  local n=$1; shift
  timeout 100 $MPI $B run -q --config bench/deepseek_v3 --backend cuda --set mesh.ep=2 --set dispatch=nvlink --set gemm.method=grouped_sm90 \
    --set expert_grad_dtype=bf16 --set roofline=false --set align=16 --set check=off --steps 20 --warmup 8 --timeout-s 60 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (dispatch|routing)' $L/$n.log | cut -c1-260 >> $S
}
go ds-contig
go ds-balanced --set expert_placement=balanced
go ds-fp8b-wire-bf16 --set precision=fp8_block --set fp8_weights=cached
go ds-fp8b-wire-fp8 --set precision=fp8_block --set fp8_weights=cached --set dispatch_dtype=fp8
go ds-fp8b-wire-bf16-r2 --set precision=fp8_block --set fp8_weights=cached
go ds-fp8b-wire-fp8-r2 --set precision=fp8_block --set fp8_weights=cached --set dispatch_dtype=fp8
[ $(el) -lt 280 ] && chk ds bench/deepseek_v3 --set expert_grad_dtype=bf16
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
