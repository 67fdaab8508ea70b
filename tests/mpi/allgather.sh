#!/usr/bin/env bash
# dispatch allgather against alltoall on the same work (CPU backend). The experts' rows come in
# the same order under both (dispatch/allgather.h), so the digests of idx, dw_gate, dw_in and
# dw_out are bitwise equal on every mesh, with capacity drops and align padding; out and dx sum
# per-rank partials in another order and may differ in the last bits at ep > 1 (each run's own
# check against float64 must pass), while at ep 1, where every dispatch is alltoall's local path
# (dispatch/registry.cpp), every digest is equal. Then the bytes: what each rank sent per a2a_*
# phase is what --dry-run predicts (to other ranks), each token reaching the ep - 1 other ranks
# once; and the memory estimate is what it holds; and the numpy verifier passes an allgather dump.
source "$(dirname "$0")/common.sh"
args=(run --config "$TINY" -q --backend cpu --set model.topk=4 --set router.aux_coeff=0.01
  --set capacity_factor=1.0)
same_digests_as_alltoall allgather "2 1 2 1" "2 1 2 16" "2 2 1 8" "4 4 1 1" "4 2 2 16"

# The independent numpy float64 verifier on an allgather step at ep 2.
mpi 2 "${args[@]}" --set mesh.ep=2 --set capacity_factor=null --set dispatch=allgather \
  --dump "$WORK/dump" >/dev/null
/usr/bin/python3 "$SRC/scripts/verify_dump.py" "$WORK/dump" | tail -1

# Bytes sent per phase and rows per token, measured and predicted, at ep 4 (4-byte CPU elements).
"$MOEBENCH" run --config "$TINY" --dry-run --json --world 4 --backend cpu --set mesh.ep=4 \
  --set dispatch=allgather >"$WORK/plan.json"
/usr/bin/python3 - "$WORK/allgather-np4-ep4-fsdp1-align1.json" "$WORK/plan.json" <<'EOF'
import json, sys
r, plan = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["dispatch"]
ph, ep, T, H = r["timing"]["phases"], 4, 32, 64
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok = ok and cond
for d in ("dispatch_fwd", "combine_fwd", "combine_bwd", "dispatch_bwd"):
    sent, predicted = ph["a2a_" + d]["bytes_sent_per_rank"], plan["bytes_per_rank_by_direction"][d]
    check(sent == (ep - 1) * T * H * 4, f"{d} sent {sent}")
    check(predicted * (ep - 1) / ep == sent, f"{d} predicted {predicted}")
    check(ph["a2a_" + d]["bytes_per_rank"] == predicted, f"{d} bytes_per_rank")
check(r["routing"]["rows_per_token_to_other_ranks"] == ep - 1, "rows per token")
check(plan["rows_per_token_to_other_ranks"] == ep - 1, "predicted rows per token")
sys.exit(0 if ok else 1)
EOF
# The memory estimate holds the gathered buffers, and at ep 1 (every dispatch's plan there)
# alltoall's positions and blocks (align 8: its rows placed straight): with balanced routing (no
# ragged growth) the CPU device's high-water mark is the plan's step bytes exactly.
for spec in "allgather 2" "alltoall 1"; do
  read -r dispatch np <<<"$spec"
  mem=(--config "$TINY" --set mesh.ep="$np" --set model.topk=4 --set routing.mode=balanced
    --set align=8 --set check=off --set roofline=false --set dispatch="$dispatch")
  mpi "$np" run -q "${mem[@]}" --out "$WORK/mem.json" >/dev/null
  "$MOEBENCH" run "${mem[@]}" --dry-run --json --world "$np" --backend cpu >"$WORK/mem_plan.json"
  /usr/bin/python3 - "$WORK/mem.json" "$WORK/mem_plan.json" "$dispatch" <<'EOF'
import json, sys
held = json.load(open(sys.argv[1]))["memory"]["high_water_bytes"]
planned = json.load(open(sys.argv[2]))["memory"]["step_bytes"]
print(f"{sys.argv[3]}: high-water {held} bytes, planned {planned}")
sys.exit(0 if held == planned else 1)
EOF
done
echo "allgather: PASS"
