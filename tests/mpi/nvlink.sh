#!/usr/bin/env bash
# dispatch nvlink against alltoall_dedup on the same work (CPU backend, whose windows are MPI
# shared memory). nvlink moves dedup's rows and sums them in dedup's order (dispatch/nvlink.h), so
# every digest, out and dx included, is bitwise alltoall_dedup's on every mesh, with capacity
# drops and align padding, in the pipeline's chunks and in the sync-free step (graph: true). Then
# the bytes: what each rank sent per a2a_* phase is what --dry-run predicts (to other ranks) under
# balanced routing; the numpy verifier passes an nvlink dump; and the refusals name the fix.
source "$(dirname "$0")/common.sh"
args=(run --config "$TINY" -q --backend cpu --set model.topk=4 --set router.aux_coeff=0.01
  --set capacity_factor=1.0)
same_digests alltoall_dedup nvlink all "1 1 1 8" "2 1 2 1" "2 2 1 8" "4 4 1 1" "4 2 2 16" \
  "8 8 1 4"
args+=(--set overlap=pipeline --set overlap_chunks=4)
same_digests alltoall_dedup nvlink all "2 2 1 8" "4 4 1 1"
# The sync-free step: the same digests as the step issued with the counts on the host.
args=(run --config "$TINY" -q --backend cpu --set model.topk=4 --set dispatch=nvlink --warmup 2)
for graph in false true; do
  mpi 4 "${args[@]}" --set mesh.ep=4 --set align=8 --set graph="$graph" \
    --out "$WORK/graph-$graph.json" >/dev/null
done
a=$(digests "$WORK/graph-false.json" idx out dx dw_gate dw_in dw_out)
b=$(digests "$WORK/graph-true.json" idx out dx dw_gate dw_in dw_out)
echo "graph false: $a"; echo "graph true:  $b"
[ "$a" = "$b" ] || fail "nvlink: the sync-free step's digests differ"

# The independent numpy float64 verifier on an nvlink step at ep 2.
mpi 2 "${args[@]}" --set mesh.ep=2 --dump "$WORK/dump" >/dev/null
/usr/bin/python3 "$SRC/scripts/verify_dump.py" "$WORK/dump" | tail -1

# Bytes written to other ranks per phase and rows per token, measured and predicted, under
# balanced routing (K 3 and E 8 coprime, E dividing T: the prediction is exact); 4-byte elements.
bal=(--config "$TINY" -q --backend cpu --set model.topk=3 --set routing.mode=balanced
  --set dispatch=nvlink)
for ep in 2 4; do
  mpi "$ep" run "${bal[@]}" --set mesh.ep="$ep" --out "$WORK/bal-$ep.json" >/dev/null
  "$MOEBENCH" run "${bal[@]}" --dry-run --json --world "$ep" --set mesh.ep="$ep" \
    >"$WORK/bal-plan-$ep.json"
  /usr/bin/python3 - "$WORK/bal-$ep.json" "$WORK/bal-plan-$ep.json" "$ep" <<'PY'
import json, sys
r, plan = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["dispatch"]
ep = int(sys.argv[3])
ph, T, H, K, E = r["timing"]["phases"], 32, 64, 3, 8
ranks = {2: 1.5, 4: 2.0}[ep]  # distinct ranks of 3 consecutive experts, 8 / ep a rank
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + f"ep {ep} " + what)
    ok = ok and cond
for d in ("dispatch_fwd", "combine_fwd", "combine_bwd", "dispatch_bwd"):
    sent, predicted = ph["a2a_" + d]["bytes_sent_per_rank"], plan["bytes_per_rank_by_direction"][d]
    check(sent == T * ranks * (ep - 1) / ep * H * 4, f"{d} sent {sent}")  # no per-row metadata
    check(predicted * (ep - 1) / ep == sent, f"{d} predicted {predicted}")
check(plan["other_bytes_per_rank"] == T * ranks * K * 4, "dp's bytes")
check(plan["layout_bytes_per_rank"] == 4 * ep * (E + ep + 2 * T * K + T * ep), "layout's bytes")
check(r["routing"]["rows_per_token_to_other_ranks"] == ranks * (ep - 1) / ep, "rows per token")
sys.exit(0 if ok else 1)
PY
done

# Refusals, before any rank starts work: more EP ranks than one host's GPUs.
out=$("$MOEBENCH" run --config "$TINY" --dry-run --world 16 --set mesh.ep=16 \
  --set model.experts=16 --set dispatch=nvlink 2>&1) && fail "mesh.ep 16 with nvlink was accepted"
grep -q 'dispatch = "nvlink" spans at most 8 EP ranks' <<<"$out" || fail "refusal: $out"
echo "nvlink: PASS"
