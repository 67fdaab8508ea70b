#!/usr/bin/env bash
# Nothing claims what it did not do. Each class of bad input is refused before any work with exit
# status 2, printed once, naming the key, flag or variable and its fix; no result file and no
# temporary file is left; and an unchecked run never says it passed.
source "$(dirname "$0")/common.sh"
refused() {  # refused NP "substring" args...: exit 2, message once, nothing written beside --out
  local np=$1 want=$2; shift 2
  set +e
  out=$(timeout 120 mpirun --oversubscribe -np "$np" "$MOEBENCH" "$@" 2>&1)
  rc=$?
  set -e
  [ $rc -eq 2 ] || { echo "$out"; fail "exit $rc (want 2) for: $*"; }
  n=$(grep -c -F -- "$want" <<<"$out" || true)
  [ "$n" -eq 1 ] || { echo "$out"; fail "'$want' printed $n times (want once) for: $*"; }
  ! grep -q "roofline calibration" <<<"$out" || { echo "$out"; fail "work began before refusing: $*"; }
  ! grep -qE '[0-9]{40}' <<<"$out" || { echo "$out"; fail "an unreadable number in: $*"; }
  echo "ok: $want"
}
R=$WORK/out/r.json
mkdir -p "$WORK/out"

# Counts that would overflow: bounded, on the command line and in the workload.
refused 2 "--steps: Value 9223372036854775807 not in range 1 to 10000000" run --config "$TINY" \
  --steps 9223372036854775807 --out "$R"
refused 2 "steps = 9223372036854775807 must be between 1 and 10000000" run --config "$TINY" \
  --set steps=9223372036854775807 --set warmup=3 --out "$R"
refused 2 "warmup = 10000001" run --config "$TINY" --set warmup=10000001 --out "$R"
refused 1 "--timeout-s: Value -1 not in range" run --config "$TINY" --timeout-s -1
refused 1 "capacity_factor = 2e+06 must be a number in (0, 1e6]" run --config "$TINY" \
  --set capacity_factor=2e6

# Output targets, checked before the calibration.
refused 2 "--out $WORK/out is a directory" run --config "$TINY" --out "$WORK/out"
refused 2 "does not exist; create it first" run --config "$TINY" --out "$WORK/nowhere/r.json"
touch "$WORK/plainfile"
refused 2 "--out $WORK/plainfile/r.json" run --config "$TINY" --out "$WORK/plainfile/r.json"
refused 2 "--dump $WORK/plainfile is an existing file" run --config "$TINY" --dump "$WORK/plainfile"
mkdir -p "$WORK/olddump/rank3"
refused 2 "is not empty (it holds rank3" run --config "$TINY" --dump "$WORK/olddump" --out "$R"
[ -z "$(ls -A "$WORK/out")" ] || { ls -la "$WORK/out"; fail "files left in the --out directory"; }

# The JSON reader: duplicate keys, numbers beyond double, absurd nesting, a directory.
printf '{"model": {"hidden": 64, "ffn": 32, "experts": 8, "topk": 2, "topk": 4}, "tokens_per_rank": 8}' \
  >"$WORK/dup.json"
refused 2 "duplicate key 'model.topk'" run --config "$WORK/dup.json"
printf '{"model": {"hidden": 64, "ffn": 32, "experts": 8, "topk": 2}, "tokens_per_rank": 8, "router": {"scaling": 1e400}}' \
  >"$WORK/big.json"
refused 2 "numbers must be finite doubles" run --config "$WORK/big.json"
python3 -c "print('[' * 100000 + ']' * 100000)" >"$WORK/deep.json"
refused 2 "JSON nested deeper than" run --config "$WORK/deep.json"
refused 2 "is a directory; give a workload JSON file" run --config "$WORK/out"

# The program's environment variables: malformed is refused, never ignored.
MOE_FAULT=1:two:throw refused 2 "MOE_FAULT=1:two:throw: expected RANK:STEP:throw" run --config "$TINY"
MOE_FAULT=0:1:explode refused 2 "MOE_FAULT=0:1:explode" run --config "$TINY"
MOE_GIT_DIRTY=yes refused 2 "MOE_GIT_DIRTY=yes: use 0 (clean) or 1 (dirty)" run --config "$TINY"

# An unchecked run: status unchecked, pass null, and compare shows it as off, not PASS.
mpi 2 run --config "$TINY" -q --set check=off --out "$WORK/unchecked.json" >/dev/null
mpi 2 run --config "$TINY" -q --out "$WORK/checked.json" >/dev/null
/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
u = json.load(open(sys.argv[1] + "/unchecked.json"))["correctness"]
c = json.load(open(sys.argv[1] + "/checked.json"))["correctness"]
if u != {"checked": False, "status": "unchecked", "checks": [], "pass": None}:
    sys.exit(f"FAIL: unchecked correctness {u}")
if c["checked"] is not True or c["status"] != "pass" or c["pass"] is not True:
    sys.exit(f"FAIL: checked correctness {c['status']} {c['pass']}")
PY
"$MOEBENCH" compare "$WORK/checked.json" "$WORK/unchecked.json" >"$WORK/cmp.txt" 2>&1 || true
grep -qE "^  correctness +PASS +off" "$WORK/cmp.txt" || { cat "$WORK/cmp.txt"; fail "compare shows the unchecked run as other than off"; }
echo "refusals: PASS"
