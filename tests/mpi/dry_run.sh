#!/usr/bin/env bash
# run --dry-run: the plan of DeepSeek-V3 on 8 GPUs, made on this machine (no GPU, one process):
# the resolved mesh, rows per expert, all-to-all bytes and memory lines, and nothing written;
# under mpirun it plans for the launched world and prints once; --world alone and a workload that
# does not fit the world are refused with exit 2.
source "$(dirname "$0")/common.sh"
DS=$SRC/configs/bench/deepseek_v3.json
"$MOEBENCH" run --config "$DS" --dry-run --world 8 --backend cuda --out "$WORK/r.json" \
  >"$WORK/plan.txt" 2>&1 || { cat "$WORK/plan.txt"; fail "dry run failed"; }
cat "$WORK/plan.txt"
for want in "mesh ep 8 x fsdp 1: 32 experts per EP rank" "1024 rows per local expert, 32768 rows per rank" \
  "[1024 x 7168] @ [7168 x 4096]" "dispatch alltoall: 448.0 MiB per rank per direction, 392.0 MiB" \
  "# knobs: expert_placement=contiguous overlap=none overlap_chunks=2 gemm.method=auto gemm.streams=4 gemm.sm90_cluster=1 gemm.sm90_schedule=cooperative gemm.sm90_fuse_swiglu=false gemm.algo=auto graph=false" \
  "# shared experts: 1, each [4096 x 7168] @ [7168 x 4096] and [4096 x 2048] @ [2048 x 7168]" \
  "memory per rank (estimate, balanced routing): step"; do
  grep -qF "$want" "$WORK/plan.txt" || fail "no '$want' in the plan"
done
[ ! -e "$WORK/r.json" ] || fail "a dry run wrote --out"

mpi 2 run --config "$TINY" --dry-run >"$WORK/np2.txt" 2>&1 || { cat "$WORK/np2.txt"; fail "np2"; }
[ "$(grep -c '^# dry run' "$WORK/np2.txt")" -eq 1 ] || { cat "$WORK/np2.txt"; fail "printed other than once"; }
grep -q "on 2 ranks" "$WORK/np2.txt" || fail "did not plan for the launched world"

rc=0
"$MOEBENCH" run --config "$TINY" --world 4 >"$WORK/bad1.txt" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "needs --dry-run" "$WORK/bad1.txt" || { cat "$WORK/bad1.txt"; fail "--world alone"; }
rc=0
"$MOEBENCH" run --config "$DS" --dry-run --world 8 --set mesh.ep=3 >"$WORK/bad2.txt" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "mesh.ep" "$WORK/bad2.txt" || { cat "$WORK/bad2.txt"; fail "bad mesh"; }
echo "dry_run: PASS"
