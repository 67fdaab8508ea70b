#!/usr/bin/env bash
# Tabular results: `run --out -` writes the result JSON alone on stdout (the report on stderr) and
# no file named '-'; the GEMM facts are fields, not sentences.
source "$(dirname "$0")/../mpi/common.sh"
PY=/usr/bin/python3
mkdir -p "$WORK/cwd"

# --out -: stdout is the JSON alone, under mpirun too; the report goes to stderr.
(cd "$WORK/cwd" && mpi 2 run --config "$TINY" --set mesh.ep=2 --out - >"$WORK/r.json" 2>"$WORK/err.txt") ||
  { cat "$WORK/r.json" "$WORK/err.txt"; fail "run --out - failed"; }
[ ! -e "$WORK/cwd/-" ] || fail "--out - created a file named '-'"
"$PY" -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j['mesh'] == {'world': 2, 'ep': 2, 'fsdp': 1}, j['mesh']
assert j['correctness']['status'] == 'pass', j['correctness']
assert j['gemm']['method'] is None and j['gemm']['plans_timed'] == 0, j['gemm']
assert 'gemm_method' not in j['provenance'] and 'gemm_plans' not in j['provenance']
" "$WORK/r.json" || { head -c 2000 "$WORK/r.json"; fail "--out - is not one result JSON on stdout"; }
grep -q '^# check: .* PASS' "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "the report is not on stderr"; }
echo "tables: PASS"
