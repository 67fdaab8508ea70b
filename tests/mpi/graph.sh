#!/usr/bin/env bash
# graph=true (CPU backend: the sync-free step, issued) with alltoall (and alltoall_dedup, which
# is alltoall at ep 1) on 1 rank and on ep 1 x fsdp 2, with allgather on ep 2 and ep 2 x fsdp 2: every run passes its float64 check, its digests are graph=false's, its report and result JSON say the
# steps ran sync-free with 0 host waits (graph=false: one per dispatcher and step, and with chunks
# one for the weight gradients' merged layout), and the
# combinations it cannot run are refused on every rank with exit status 2, naming the fix.
source "$(dirname "$0")/common.sh"
args=(run --config "$TINY" -q --backend cpu --steps 2 --warmup 2 --set router.aux_coeff=0.01)
for mesh in "1 1 1" "2 1 2" "2 2 1" "4 2 2"; do
  read -r np ep fsdp <<<"$mesh"
  # At ep 1 every dispatch is alltoall's local path, alltoall_dedup's too.
  extras=("" "--set overlap=pipeline --set overlap_chunks=4 --set align=8"
    "--set dispatch=alltoall_dedup")
  # At ep > 1 only the all-gather dispatcher's collectives have fixed sizes.
  [ "$ep" -gt 1 ] && extras=("--set dispatch=allgather"
    "--set dispatch=allgather --set overlap=pipeline --set align=8 --set capacity_factor=0.75")
  for extra in "${extras[@]}"; do
    tag="np$np-ep$ep-$(echo "$extra" | tr -dc 'a-z0-9')"
    for g in false true; do
      # shellcheck disable=SC2086
      mpi "$np" "${args[@]}" --set mesh.ep="$ep" --set mesh.fsdp="$fsdp" $extra --set graph="$g" \
        --out "$WORK/$tag-$g.json" >"$WORK/$tag-$g.txt" ||
        { cat "$WORK/$tag-$g.txt"; fail "$tag graph=$g: the run failed"; }
      grep -qE "^# check: [0-9]+/[0-9]+ PASS" "$WORK/$tag-$g.txt" ||
        { cat "$WORK/$tag-$g.txt"; fail "$tag graph=$g: no PASS"; }
    done
    keys=(out dx dw_gate dw_in dw_out idx)
    [ "$(digests "$WORK/$tag-true.json" "${keys[@]}")" = "$(digests "$WORK/$tag-false.json" "${keys[@]}")" ] ||
      fail "$tag: graph=true changed the results"
    grep -q "^# host: .* ms to issue a step (median), 0.0 waits for the device per step; steps sync-free" \
      "$WORK/$tag-true.txt" || { cat "$WORK/$tag-true.txt"; fail "$tag: no sync-free '# host:' line"; }
    /usr/bin/python3 - "$WORK/$tag" "$extra" <<'PY'
import json, sys
base, extra = sys.argv[1], sys.argv[2]
t, f = (json.load(open(f"{base}-{g}.json")) for g in ("true", "false"))
chunks = (2 if "allgather" in extra else 4) if "pipeline" in extra else 1
def check(cond, what):
    if not cond:
        sys.exit(f"FAIL: {base}: {what}")
check(t["config"]["graph"] is True and f["config"]["graph"] is False, "graph not in the config")
check(t["timing"]["host"]["step"] == "sync-free" and f["timing"]["host"]["step"] == "issued",
      "timing.host.step")
check(t["timing"]["host"]["waits_per_step"] == 0, "the sync-free step waited for the device")
check(f["timing"]["host"]["waits_per_step"] == chunks + (chunks > 1),
      "graph=false: not one wait per dispatcher (and one for the merged layout)")
check(t["routing"]["rows_per_expert"] == f["routing"]["rows_per_expert"],
      "the routing statistics differ")
PY
  done
done

for bad in "--set mesh.ep=2|set dispatch=nvlink or allgather (fixed sizes), or mesh.ep=1, or graph=false" \
  "--set mesh.ep=2 --set dispatch=alltoall_dedup|dispatch = \"alltoall_dedup\" takes its all-to-all's sizes from counts on the host" \
  "--set mesh.ep=1 --warmup 1|set warmup to 2 or more (got 1)"; do
  set="${bad%%|*}" want="${bad#*|}"
  rc=0
  # shellcheck disable=SC2086
  mpi 2 run --config "$TINY" -q --backend cpu --set graph=true $set >"$WORK/bad.txt" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || { cat "$WORK/bad.txt"; fail "$set gave exit $rc, want 2"; }
  [ "$(grep -c -F "$want" "$WORK/bad.txt")" -eq 1 ] || { cat "$WORK/bad.txt"; fail "$set: message"; }
done
echo "graph: PASS"
