#!/usr/bin/env bash
# scripts/sweep.sh and scripts/report.py: a 2x2 sweep of tiny on 2 ranks, re-run (everything
# skipped), re-run after deleting one result (only it runs), a failing point, refused arguments,
# then the report: a table row per point and valid PNG plots.
source "$(dirname "$0")/common.sh"
PY=/usr/bin/python3
sweep() {
  bash "$SRC/scripts/sweep.sh" --config "$TINY" --np 2 --bin "$MOEBENCH" --out "$WORK/results" "$@"
}
AXES=(--axis "tokens_per_rank=16,32" --axis "mesh.ep=1,2")
expect() {  # expect PATTERN TEXT: TEXT has a line matching PATTERN (grep -E)
  grep -qE -- "$1" <<< "$2" || { echo "$2"; fail "output lacks /$1/"; }
}

out=$(sweep --name t "${AXES[@]}") || { echo "$out"; fail "the sweep failed"; }
echo "$out"
dirs=("$WORK"/results/t/*/)
[ ${#dirs[@]} -eq 1 ] || fail "expected one commit folder under results/t, got ${dirs[*]}"
DIR=${dirs[0]%/}
expect '^sweep: mesh.ep is swept .*mesh.fsdp=auto' "$out"
expect '^\[1/4\] tokens_per_rank=16 mesh.ep=1 \.\.\. ok \(step [0-9.]+ ms' "$out"
expect '4 points: 4 ran ok, 0 skipped \(already done\), 0 failed' "$out"
for p in 16,mesh.ep=1 16,mesh.ep=2 32,mesh.ep=1 32,mesh.ep=2; do
  [ -f "$DIR/tokens_per_rank=$p.json" ] || fail "no result for tokens_per_rank=$p"
done
results=("$DIR"/tokens_per_rank=*.json)
[ ${#results[@]} -eq 4 ] && [ -f "$DIR/index.json" ] || fail "not 4 results and an index: ${results[*]}"
"$PY" - "$DIR" <<'EOF' || fail "index.json is wrong"
import json, os, sys
d = sys.argv[1]
index = json.load(open(os.path.join(d, "index.json")))
assert len(index) == 4, index
seen = set()
for e in index:
    assert e["status"] == "ok" and e["exit"] == 0, e
    assert list(e["axes"]) == ["tokens_per_rank", "mesh.ep"], e
    r = json.load(open(os.path.join(d, e["file"])))
    assert str(r["config"]["tokens_per_rank"]) == e["axes"]["tokens_per_rank"], e
    assert str(r["mesh"]["ep"]) == e["axes"]["mesh.ep"] and r["mesh"]["world"] == 2, e
    seen.add(tuple(e["axes"].values()))
assert seen == {("16", "1"), ("16", "2"), ("32", "1"), ("32", "2")}, seen
EOF

# Resumable: the same command skips every point and changes no result.
before=$(stat -c '%n %Y' "$DIR"/*.json)
out=$(sweep --name t "${AXES[@]}") || { echo "$out"; fail "the re-run failed"; }
[ "$(echo "$out" | grep -c '\.\.\. skipped (done: step')" -eq 4 ] || { echo "$out"; fail "not 4 skipped"; }
expect '4 points: 0 ran ok, 4 skipped' "$out"
[ "$before" = "$(stat -c '%n %Y' "$DIR"/*.json)" ] || fail "a skipped point's file changed"

# One result gone: only that point runs.
rm "$DIR/tokens_per_rank=32,mesh.ep=2.json"
out=$(sweep --name t "${AXES[@]}") || { echo "$out"; fail "the third run failed"; }
echo "$out"
expect '^\[4/4\] tokens_per_rank=32 mesh.ep=2 \.\.\. ok' "$out"
expect '4 points: 1 ran ok, 3 skipped' "$out"
[ -f "$DIR/tokens_per_rank=32,mesh.ep=2.json" ] || fail "the deleted point was not re-run"

# Other settings into the same folder are refused; so are bad arguments.
set +e
msg=$(sweep --name t "${AXES[@]}" --set router.score=sigmoid 2>&1); rc=$?
set -e
[ $rc -eq 2 ] || { echo "$msg"; fail "other settings in the same sweep folder: exit $rc"; }
expect 'other settings' "$msg"
for bad in "--axis tokens_per_rank=16" "--name x --axis tokens_per_rank=" \
           "--name x --axis tokens_per_rank=16 --bogus"; do
  set +e
  msg=$(sweep $bad 2>&1); rc=$?
  set -e
  [ $rc -eq 2 ] || fail "bad arguments ($bad): exit $rc"
  expect '^sweep.sh: ' "$msg"
done

# A failing point is recorded with its log, the sweep goes on and exits non-zero.
set +e
out=$(sweep --name f --axis mesh.ep=3,2 2>&1); rc=$?
set -e
echo "$out"
[ $rc -ne 0 ] || fail "a sweep with a failed point exited 0"
expect '^\[1/2\] mesh.ep=3 \.\.\. FAILED \(exit 2: bad input' "$out"
expect '^\[2/2\] mesh.ep=2 \.\.\. ok' "$out"
FDIR=$(echo "$WORK"/results/f/*)
[ -s "$FDIR/mesh.ep=3.log" ] && [ ! -e "$FDIR/mesh.ep=3.json" ] || fail "failed point: log or result"
grep -q 'mesh.ep = 3' "$FDIR/mesh.ep=3.log" || fail "the failed point's log lacks the error"
"$PY" -c "
import json, sys
st = {e['point']: e['status'] for e in json.load(open(sys.argv[1]))}
assert st == {'mesh.ep=3': 'failed', 'mesh.ep=2': 'ok'}, st" "$FDIR/index.json" ||
  fail "index of the failing sweep"

# The report: one row per point, the three plots as PNG files.
"$PY" "$SRC/scripts/report.py" "$DIR" --out "$WORK/report"
MD=$WORK/report/report.md
rows=$(grep -cE '^\| (16|32) \| (1|2) \| 2 \([12]x[12]\) \| [0-9.]+ \|.* PASS \|$' "$MD" || true)
[ "$rows" -eq 4 ] || { cat "$MD"; fail "report.md has $rows rows of results, not 4"; }
grep -q '| SM MHz (slowest rank) | check |' "$MD" || { cat "$MD"; fail "no clocks column"; }
for png in step_ms tflops_per_rank a2a_busbw; do
  f=$WORK/report/$png.png
  [ -s "$f" ] || fail "no $png.png"
  [ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$png.png is not a PNG"
  grep -q "($png.png)" "$MD" || fail "report.md does not show $png.png"
done
# Two sweeps on one plot (the failing one has no tokens_per_rank axis: refused, named).
"$PY" "$SRC/scripts/report.py" "$DIR" "$FDIR" --x mesh.ep --out "$WORK/report2" >/dev/null
grep -q "mesh.ep=3" "$WORK/report2/report.md" || fail "the failed point is not in report2"
set +e
msg=$("$PY" "$SRC/scripts/report.py" "$DIR" "$FDIR" --out "$WORK/report3" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q 'has no axis tokens_per_rank' <<< "$msg" || { echo "$msg"; fail "axis check"; }
# An empty or malformed folder is a clear error.
mkdir "$WORK/empty"
set +e
msg=$("$PY" "$SRC/scripts/report.py" "$WORK/empty" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q 'no index.json' <<< "$msg" || { echo "$msg"; fail "empty folder"; }
echo '{"not": "a list"}' > "$WORK/empty/index.json"
set +e
msg=$("$PY" "$SRC/scripts/report.py" "$WORK/empty" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q 'malformed' <<< "$msg" || { echo "$msg"; fail "malformed index"; }
echo "sweep_report: PASS"
