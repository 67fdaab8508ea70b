#!/usr/bin/env bash
# Session 31, call 6 (nvidia-h200), main at 1e60a30: --dry-run's shared_ffn warning on the CUDA
# build; the grouped kernel's knobs on Qwen3-30B-A3B's step at EP 1
# on an H200 (issue 15's and 18's Qwen3-30B-A3B targets): SwiGLU fused into the epilogues,
# ping-pong warpgroups, fewer persistent CTAs; graph at 4096 tokens, 8192 without.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
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
go() {  # name [more]
  local n=$1; shift
  [ $(el) -gt 230 ] && { echo "skip $n" >> $S; return; }
  timeout 60 $B run -q --config bench/qwen3_30b_a3b --backend cuda --set expert_grad_dtype=bf16 --set roofline=false --set align=16 \
    --set check=off --steps 20 --warmup 8 --set warmup_s=3 --set gemm.method=grouped_sm90 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
}
$B run --config bench/deepseek_v3 --dry-run --backend cuda --set model.shared_experts=0 > $L/dry.log 2>&1
echo "== dry-run rc=$?: $(grep -c '# warning' $L/dry.log) warnings: $(grep 'shared_ffn' $L/dry.log)" >> $S
G="--set graph=true"
go g-base $G
go g-fuse $G --set gemm.sm90_fuse_swiglu=true
go g-pp $G --set gemm.sm90_schedule=pingpong
go g-fuse-pp $G --set gemm.sm90_fuse_swiglu=true --set gemm.sm90_schedule=pingpong
go g-base-r2 $G
go g-fuse-r2 $G --set gemm.sm90_fuse_swiglu=true
go t8k-base --set tokens_per_rank=8192
go t8k-fuse --set tokens_per_rank=8192 --set gemm.sm90_fuse_swiglu=true
go t8k-pp --set tokens_per_rank=8192 --set gemm.sm90_schedule=pingpong
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
