#!/usr/bin/env bash
# moebench compare on real results: two identical runs compare clean and bitwise identical; a run
# of another mesh is refused naming mesh.ep; a 3x slower step fails --fail-on-regression.
source "$(dirname "$0")/common.sh"
args=(run --config "$TINY" -q --set mesh.ep=2 --set mesh.fsdp=2)
mpi 4 "${args[@]}" --out "$WORK/a.json" >/dev/null
mpi 4 "${args[@]}" --out "$WORK/b.json" >/dev/null
mpi 4 run --config "$TINY" -q --set mesh.ep=4 --set mesh.fsdp=1 --out "$WORK/ep4.json" >/dev/null

# compare_rc WANT ARGS...: runs compare as a single process (no mpirun), checks its exit status.
compare_rc() {
  local want=$1; shift
  set +e
  out=$("$MOEBENCH" compare "$@" 2>&1)
  rc=$?
  set -e
  [ "$rc" -eq "$want" ] || { echo "$out"; fail "exit $rc, want $want: compare $*"; }
}

# Run-to-run noise on shared CPUs can exceed the spreads, so only the exit status without
# --fail-on-regression and the digests are asserted here.
compare_rc 0 "$WORK/a.json" "$WORK/b.json"
echo "$out"
grep -q "^# digests: bitwise identical results" <<< "$out" || fail "digests not identical"
grep -q "^  step " <<< "$out" || fail "no step row"
echo "ok: identical runs compare, bitwise identical"

# Under mpirun the table is printed once.
out=$(mpi 2 compare "$WORK/a.json" "$WORK/b.json" --metrics timing)
[ "$(echo "$out" | grep -c '^# moebench compare')" -eq 1 ] || { echo "$out"; fail "printed twice"; }
echo "ok: under mpirun, one table"

compare_rc 2 "$WORK/a.json" "$WORK/ep4.json"
grep -q "mesh.ep: 2 ($WORK/a.json) vs 4 ($WORK/ep4.json)" <<< "$out" ||
  { echo "$out"; fail "refusal does not name mesh.ep"; }
echo "ok (2): different mesh refused: $(echo "$out" | grep mesh.ep)"
# The refusal names what may differ from the key table itself (check_unquantized and warmup_s once
# went unnamed in a list written by hand).
grep -q "and in name, steps, warmup, warmup_s, check, check_unquantized, reference, roofline)" \
  <<< "$out" || { echo "$out"; fail "refusal does not list the run keys"; }

echo '{"name": "tiny"}' > "$WORK/config.json"
compare_rc 2 "$WORK/a.json" "$WORK/config.json"
grep -q "config.json is not a moebench result" <<< "$out" || { echo "$out"; fail "not refused"; }
echo "ok (2): non-result refused"

# From run a: a tight copy (A) and one whose step is 3x slower (B), both with 1% spreads.
/usr/bin/python3 - "$WORK" <<'EOF'
import json, sys
work = sys.argv[1]
r = json.load(open(f"{work}/a.json"))
def tight(stats, median):
    stats.update(median=median, p10=median * 0.995, p90=median * 1.005)
step = r["timing"]["step"]["median"]
tight(r["timing"]["step"], step)
json.dump(r, open(f"{work}/tight.json", "w"), indent=2)
tight(r["timing"]["step"], 3 * step)
json.dump(r, open(f"{work}/slow.json", "w"), indent=2)
EOF
compare_rc 0 "$WORK/tight.json" "$WORK/slow.json" --metrics timing
compare_rc 1 "$WORK/tight.json" "$WORK/slow.json" --fail-on-regression
grep -q "^# slower than A beyond the noise: B: step x3.000" <<< "$out" ||
  { echo "$out"; fail "verdict does not name the step"; }
compare_rc 0 "$WORK/tight.json" "$WORK/tight.json" --fail-on-regression
compare_rc 0 "$WORK/slow.json" "$WORK/tight.json" --fail-on-regression --threshold 5
echo "ok (1): 3x slower step fails --fail-on-regression"

# A run whose timed steps drift (timing.step_drift past 5%) is named in a note; a steady one not.
/usr/bin/python3 - "$WORK" <<'EOF'
import json, sys
work = sys.argv[1]
r = json.load(open(f"{work}/tight.json"))
r["timing"]["step_drift"] = {"thirds_ms": [27.2, 27.8, 31.3], "spread": 31.3 / 27.2 - 1}
json.dump(r, open(f"{work}/drifting.json", "w"), indent=2)
r["timing"]["step_drift"] = {"thirds_ms": [27.2, 27.5, 27.3], "spread": 27.5 / 27.2 - 1}
json.dump(r, open(f"{work}/steady.json", "w"), indent=2)
EOF
compare_rc 0 "$WORK/steady.json" "$WORK/drifting.json" --metrics timing
grep -q "^# note: B's timed steps drift 15% " <<< "$out" || { echo "$out"; fail "no drift note for B"; }
! grep -q "^# note: A's timed steps drift" <<< "$out" || { echo "$out"; fail "drift note for a steady A"; }
echo "ok: a drifting run is noted"
echo "compare: PASS"
