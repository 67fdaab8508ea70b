#!/usr/bin/env bash
# Session 34, call 1 (4 H200s, nvidia-h200-x4): issue 14's dispatcher comparison at EP 4 on H200s
# (earlier EP 4 runs were on H100s): the three bench workloads x {alltoall, alltoall_dedup,
# allgather, nvlink}, `none`, plus the pipeline (2 chunks), balanced placement, graphs and
# EP 2 x FSDP 2; then checks at EP 4 and the network transport (sockets) on Qwen3-30B-A3B.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader >> $S
nvidia-smi topo -m | head -6 >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j64 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
row() { python3 - "$1" <<'PY' 2>&1 | tail -1
import json, sys
d = json.load(open(sys.argv[1])); t = d["timing"]; p = t["phases"]; la = t.get("lanes") or {}
sent = sum(v.get("bytes_sent_per_rank") or 0 for k, v in p.items() if k.startswith("a2a_")) / 2**20
cl = [round(r["sm_mhz"]["median"]) for r in t.get("clocks", {}).get("ranks", [])]
g = lambda k: round(la[k]["median"], 3) if la.get(k) else None
print("step", round(t["step"]["median"], 3), "TFLOP/s", round(d["throughput"]["tflops_per_rank"], 1),
      "a2a", g("a2a"), "exposed", g("a2a_exposed"), "least", g("a2a_least_rank"), "MiB", round(sent, 1),
      "exp", round(p["experts_fwd"]["median"], 2), round(p["experts_bwd"]["median"], 2),
      "method", (d.get("gemm") or {}).get("method"), "clocks", cl)
PY
}
go() {  # budget np name config [more]
  local lim=$1 np=$2 n=$3 cfg=$4; shift 4
  [ $(el) -gt $lim ] && { echo "skip $n" >> $S; return; }
  timeout 60 mpirun --allow-run-as-root -np $np -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY $EXTRA \
    $B run -q --config $cfg --backend cuda --set roofline=false --set align=16 \
    --set check=off --steps 20 --warmup 8 --set warmup_s=2 --timeout-s 50 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
}
EXTRA=""
BF="--set expert_grad_dtype=bf16"
DS="bench/deepseek_v3 $BF --set mesh.ep=4"
MX="bench/mixtral_8x7b $BF --set tokens_per_rank=8192 --set mesh.ep=4"
QW="bench/qwen3_30b_a3b $BF --set mesh.ep=4"
for d in nvlink alltoall_dedup allgather alltoall; do
  go 330 4 ds-$d $DS --set dispatch=$d
  go 330 4 mx-$d $MX --set dispatch=$d
  go 330 4 qw-$d $QW --set dispatch=$d
done
go 360 4 ds-nvlink-balanced $DS --set dispatch=nvlink --set expert_placement=balanced
go 370 4 qw-nvlink-graph $QW --set dispatch=nvlink --set graph=true
go 380 4 qw-allgather-graph $QW --set dispatch=allgather --set graph=true
go 390 4 ds-nvlink-pipe2 $DS --set dispatch=nvlink --set overlap=pipeline --set overlap_chunks=2
go 400 4 mx-nvlink-pipe2 $MX --set dispatch=nvlink --set overlap=pipeline --set overlap_chunks=2
go 410 4 qw-nvlink-pipe2 $QW --set dispatch=nvlink --set overlap=pipeline --set overlap_chunks=2
go 420 4 ds-ep2fsdp2-nvlink bench/deepseek_v3 $BF --set mesh.ep=2 --set dispatch=nvlink
chk() {  # name [more]
  local n=$1; shift
  [ $(el) -gt 480 ] && { echo "skip check $n" >> $S; return; }
  timeout 60 mpirun --allow-run-as-root -np 4 -x NCCL_NVLS_ENABLE=0 $B run -q --backend cuda --set align=16 --steps 3 --warmup 2 --set warmup_s=0 --set check=first --timeout-s 50 "$@" > $L/chk-$n.log 2>&1
  echo "== check $n rc=$? at $(el) s: $(grep -E '^# check:' $L/chk-$n.log)" >> $S
}
chk qw-nvlink-graph --config bench/qwen3_30b_a3b --set mesh.ep=4 --set dispatch=nvlink --set graph=true
chk mx-dedup --config bench/mixtral_8x7b --set mesh.ep=4 --set dispatch=alltoall_dedup
chk ds-nvlink-balanced --config bench/deepseek_v3 --set mesh.ep=4 --set dispatch=nvlink --set expert_placement=balanced
EXTRA="-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
for d in alltoall_dedup allgather alltoall; do
  [ $(el) -gt 540 ] && { echo "skip sockets $d" >> $S; continue; }
  timeout 50 mpirun --allow-run-as-root -np 4 -x NCCL_NVLS_ENABLE=0 $EXTRA $B run -q --config bench/qwen3_30b_a3b --backend cuda $BF --set mesh.ep=4 --set dispatch=$d --set roofline=false --set align=16 --set check=off --steps 5 --warmup 2 --set warmup_s=0 --set gemm.method=grouped_sm90 --timeout-s 40 --out $L/qw-sock-$d.json > $L/qw-sock-$d.log 2>&1
  echo "== qw-sock-$d rc=$? at $(el) s: $(row $L/qw-sock-$d.json)" >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
