#!/usr/bin/env bash
# dispatch alltoall_dedup against alltoall on the same work (CPU backend). The experts' rows come
# in the same order under both (dispatch/alltoall_dedup.h), so the digests of idx, dw_gate, dw_in
# and dw_out are bitwise equal on every mesh, with capacity drops and align padding; out and dx
# sum per-(token, rank) partials at the expert rank and may differ in the last bits at ep > 1
# (each run's own check against float64 must pass, and the two dumps must agree within MATH.md's
# tolerances), while at ep 1, where nothing crosses a wire, every digest is equal. Then the bytes:
# what each rank sent per a2a_* phase is what --dry-run predicts (to other ranks) under balanced
# routing, and so are the rows per token that reach other ranks; the memory estimate is what it
# holds; and the numpy verifier passes a dedup dump.
source "$(dirname "$0")/common.sh"
args=(run --config "$TINY" -q --backend cpu --set model.topk=4 --set router.aux_coeff=0.01
  --set capacity_factor=1.0)
same_digests_as_alltoall alltoall_dedup "1 1 1 8" "2 1 2 1" "2 2 1 8" "4 4 1 1" "4 2 2 16"

# out and dx against alltoall's at ep 2 and 4 (partial sums cross in the storage dtype): within
# MATH.md's tolerances of each other, the figures printed.
for ep in 2 4; do
  for d in alltoall alltoall_dedup; do
    mpi "$ep" "${args[@]}" --set mesh.ep="$ep" --set dispatch="$d" --dump "$WORK/cmp-$d-$ep" \
      >/dev/null
  done
  /usr/bin/python3 "$SRC/scripts/compare_dumps.py" "$WORK/cmp-alltoall-$ep" \
    "$WORK/cmp-alltoall_dedup-$ep" >"$WORK/cmp-$ep.txt" ||
    { cat "$WORK/cmp-$ep.txt"; fail "ep $ep: alltoall_dedup's dump differs from alltoall's"; }
  grep -E "^(out|dx|dw_gate|dw_in) " "$WORK/cmp-$ep.txt" | sed "s/^/ep $ep vs alltoall: /"
done

# The independent numpy float64 verifier on a dedup step at ep 2.
mpi 2 "${args[@]}" --set mesh.ep=2 --set capacity_factor=null --set dispatch=alltoall_dedup \
  --dump "$WORK/dump" >/dev/null
/usr/bin/python3 "$SRC/scripts/verify_dump.py" "$WORK/dump" | tail -1

# Bytes sent per phase and rows per token, measured and predicted, under balanced routing: K 3
# and E 8 coprime, E dividing T, so every token's 3 consecutive experts start evenly over the
# ranks' blocks and the prediction is exact (dispatch/ranks_per_token.h); 4-byte CPU elements.
bal=(--config "$TINY" -q --backend cpu --set model.topk=3 --set routing.mode=balanced
  --set dispatch=alltoall_dedup)
for ep in 2 4; do
  mpi "$ep" run "${bal[@]}" --set mesh.ep="$ep" --out "$WORK/bal-$ep.json" >/dev/null
  "$MOEBENCH" run "${bal[@]}" --dry-run --json --world "$ep" --set mesh.ep="$ep" \
    >"$WORK/bal-plan-$ep.json"
  /usr/bin/python3 - "$WORK/bal-$ep.json" "$WORK/bal-plan-$ep.json" "$ep" <<'PY'
import json, sys
r, plan = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["dispatch"]
ep = int(sys.argv[3])
ph, T, H, K = r["timing"]["phases"], 32, 64, 3
ranks = {2: 1.5, 4: 2.0}[ep]  # distinct ranks of 3 consecutive experts, 8 / ep a rank
wire_to_others = T * ranks * (ep - 1) / ep
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + f"ep {ep} " + what)
    ok = ok and cond
for d in ("dispatch_fwd", "combine_fwd", "combine_bwd", "dispatch_bwd"):
    sent, predicted = ph["a2a_" + d]["bytes_sent_per_rank"], plan["bytes_per_rank_by_direction"][d]
    row = H * 4 + (8 * K if d == "dispatch_fwd" else 0)  # the dispatch carries slots and weights
    check(sent == wire_to_others * row, f"{d} sent {sent}")
    check(predicted * (ep - 1) / ep == sent, f"{d} predicted {predicted}")
    check(ph["a2a_" + d]["bytes_per_rank"] == predicted, f"{d} bytes_per_rank")
check(plan["other_bytes_per_rank"] == T * ranks * K * 4, "dp's bytes")
check(r["routing"]["rows_per_token_to_other_ranks"] == ranks * (ep - 1) / ep, "rows per token")
check(plan["rows_per_token_to_other_ranks"] == ranks * (ep - 1) / ep, "predicted rows per token")
sys.exit(0 if ok else 1)
PY
done

# The memory estimate holds the wire buffers: at ep 2 with balanced routing (no ragged growth)
# the CPU device's high-water mark is the plan's step bytes exactly.
mem=("${bal[@]}" --set mesh.ep=2 --set align=8 --set check=off --set roofline=false)
mpi 2 run "${mem[@]}" --out "$WORK/mem.json" >/dev/null
"$MOEBENCH" run "${mem[@]}" --dry-run --json --world 2 >"$WORK/mem_plan.json"
/usr/bin/python3 - "$WORK/mem.json" "$WORK/mem_plan.json" <<'PY'
import json, sys
held = json.load(open(sys.argv[1]))["memory"]["high_water_bytes"]
planned = json.load(open(sys.argv[2]))["memory"]["step_bytes"]
print(f"high-water {held} bytes, planned {planned}")
sys.exit(0 if held == planned else 1)
PY
echo "alltoall_dedup: PASS"
