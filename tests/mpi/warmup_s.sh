#!/usr/bin/env bash
# warmup_s lengthens the untimed part of a run, not what it computes: on ep 2 (nvlink) with 0.5 s
# the warm-up adds steps (timing.settle_steps, the report's mesh line) and the timed steps' digests
# and check are those of the run without it, with the step issued call by call and with graph
# true (the CPU backend runs the sync-free step as issued).
source "$(dirname "$0")/common.sh"
args=(run --config "$TINY" --backend cpu --set mesh.ep=2 --set dispatch=nvlink --steps 2 --warmup 2
  --set router.aux_coeff=0.01)
for g in false true; do
  mpi 2 "${args[@]}" --set graph=$g -q --out "$WORK/plain-$g.json" >/dev/null
  mpi 2 "${args[@]}" --set graph=$g --set warmup_s=0.5 --out "$WORK/settled-$g.json" \
    >"$WORK/settled-$g.txt" 2>&1 || { cat "$WORK/settled-$g.txt"; fail "warmup_s, graph $g: the run failed"; }
  grep -qE "^# check: [0-9]+/[0-9]+ PASS" "$WORK/settled-$g.txt" ||
    { cat "$WORK/settled-$g.txt"; fail "warmup_s, graph $g: no PASS"; }
  grep -qE "^# mesh 2 ranks = ep 2 x fsdp 1, 2 warm-up \(\+ [1-9][0-9]* to last warmup_s 0.5 s\) \+ 2 timed steps" \
    "$WORK/settled-$g.txt" || { cat "$WORK/settled-$g.txt"; fail "warmup_s, graph $g: no steps added on the mesh line"; }
  /usr/bin/python3 - "$WORK/plain-$g.json" "$WORK/settled-$g.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
from checks import check
check(a["timing"]["settle_steps"] == 0, "steps added without warmup_s")
check(b["timing"]["settle_steps"] > 0, "no steps added for warmup_s 0.5")
check(b["config"]["warmup_s"] == 0.5, "warmup_s not in the result's config")
check(a["digests"] == b["digests"], "warmup_s changed what the timed steps compute")
PY
done
