#!/usr/bin/env bash
# Session 34, call 5 (4 H200s, the budget's last minutes): call 1's single runs repeated,
# alternating: DeepSeek-V3 at EP 4 with balanced placement, nvlink against alltoall_dedup;
# Mixtral-8x7B at EP 4, nvlink against alltoall_dedup.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j64 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
row() { python3 - "$1" <<'PY' 2>&1 | tail -1
import json, sys
d = json.load(open(sys.argv[1])); t = d["timing"]; la = t.get("lanes") or {}
cl = [round(r["sm_mhz"]["median"]) for r in t.get("clocks", {}).get("ranks", [])]
g = lambda k: round(la[k]["median"], 3) if la.get(k) else None
print("step", round(t["step"]["median"], 3), "TFLOP/s", round(d["throughput"]["tflops_per_rank"], 1),
      "a2a", g("a2a"), "least", g("a2a_least_rank"), "method", (d.get("gemm") or {}).get("method"), "clocks", cl)
PY
}
go() {  # name config [more]
  local n=$1 cfg=$2; shift 2
  [ $(el) -gt 150 ] && { echo "skip $n" >> $S; return; }
  timeout 30 mpirun --allow-run-as-root -np 4 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    $B run -q --config $cfg --backend cuda --set roofline=false --set align=16 --set expert_grad_dtype=bf16 \
    --set mesh.ep=4 --set check=off --steps 20 --warmup 8 --set warmup_s=2 --timeout-s 25 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
}
for r in 1 2 3; do
  go ds-bal-nvlink-r$r bench/deepseek_v3 --set expert_placement=balanced --set dispatch=nvlink
  go ds-bal-dedup-r$r bench/deepseek_v3 --set expert_placement=balanced --set dispatch=alltoall_dedup
  go mx-nvlink-r$r bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=lt_multistream --set dispatch=nvlink
  go mx-dedup-r$r bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=lt_multistream --set dispatch=alltoall_dedup
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
