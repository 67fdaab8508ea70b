#!/usr/bin/env bash
# Session 31, call 3 (nvidia-h200, warm): EP 1 steps by GEMM method and precision, bf16 expert
# gradients: Mixtral-8x7B at 8192 tokens (issue 18's 680 TFLOP/s), FP8 against bf16 (issue 16).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake --build build-gpu --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
row() { python3 - "$1" <<'PY' 2>&1 | tail -1
import json, sys
d = json.load(open(sys.argv[1])); t = d["timing"]; p = t["phases"]
cl = [round(r["sm_mhz"]["median"]) for r in t.get("clocks", {}).get("ranks", [])]
print("step", round(t["step"]["median"], 3), "TFLOP/s", round(d["throughput"]["tflops_per_rank"], 1),
      "experts", round(p["experts_fwd"]["median"], 3), round(p["experts_bwd"]["median"], 3), "clocks", cl)
PY
}
go() {  # name config [more]
  local n=$1 cfg=$2; shift 2
  [ $(el) -gt 400 ] && { echo "skip $n" >> $S; return; }
  timeout 100 $B run -q --config $cfg --backend cuda --set expert_grad_dtype=bf16 --set roofline=false --set align=16 \
    --set check=off --steps 20 --warmup 8 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (expert GEMMs|warning)' $L/$n.log | cut -c1-200 | head -2 >> $S
}
MX="bench/mixtral_8x7b --set tokens_per_rank=8192"
go mx-lt $MX --set gemm.method=lt_multistream
go mx-g90 $MX --set gemm.method=grouped_sm90
go mx-auto $MX --set gemm.method=auto
go mx-fp8t-auto $MX --set gemm.method=auto --set precision=fp8_tensor --set fp8_weights=cached
go mx-fp8b-auto $MX --set gemm.method=auto --set precision=fp8_block --set fp8_weights=cached
go mx-lt-r2 $MX --set gemm.method=lt_multistream
go mx-g90-r2 $MX --set gemm.method=grouped_sm90
go ds-auto bench/deepseek_v3 --set gemm.method=auto
go ds-fp8b-auto bench/deepseek_v3 --set gemm.method=auto --set precision=fp8_block --set fp8_weights=cached
go ds-fp8t-auto bench/deepseek_v3 --set gemm.method=auto --set precision=fp8_tensor --set fp8_weights=cached
go qw8k-auto bench/qwen3_30b_a3b --set tokens_per_rank=8192 --set gemm.method=auto
go qw8k-fp8t-auto bench/qwen3_30b_a3b --set tokens_per_rank=8192 --set gemm.method=auto --set precision=fp8_tensor --set fp8_weights=cached
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
