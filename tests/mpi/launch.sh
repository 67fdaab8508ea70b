#!/usr/bin/env bash
# Where ranks ran, and --profile, in the result JSON: a 2-rank CPU run records each rank's host
# (no GPU) and profile true, logs that the profile is recorded only, and prints the hosts at
# start-up; --profile with --dry-run is refused with exit 2.
source "$(dirname "$0")/common.sh"
mpi 2 run --config "$TINY" --set mesh.ep=2 --profile --out "$WORK/r.json" >"$WORK/run.txt" 2>&1 ||
  { cat "$WORK/run.txt"; fail "run --profile"; }
grep -q "hosts: rank 0-1 on $(hostname)" "$WORK/run.txt" || { cat "$WORK/run.txt"; fail "no hosts line"; }
grep -q "profile: the cpu backend has no profiler to start" "$WORK/run.txt" ||
  { cat "$WORK/run.txt"; fail "no profile line"; }
python3 - "$WORK/r.json" "$(hostname)" <<'PY' || fail "result JSON"
import json, sys
p = json.load(open(sys.argv[1]))["provenance"]
assert p["profile"] is True, p["profile"]
assert [r["rank"] for r in p["ranks"]] == [0, 1], p["ranks"]
assert all(r["host"] == sys.argv[2] and "gpu" not in r for r in p["ranks"]), p["ranks"]
PY
rc=0
"$MOEBENCH" run --config "$TINY" --dry-run --profile >"$WORK/bad.txt" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--profile" "$WORK/bad.txt" || { cat "$WORK/bad.txt"; fail "--profile --dry-run: rc $rc"; }
echo "launch: PASS"
