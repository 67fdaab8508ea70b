#!/usr/bin/env bash
# scripts/ab.sh with one binary as both A and B: the rounds alternate and are tabled, the median
# rounds compare bitwise identical; an environment variable given to B alone reaches B's ranks
# (a MOE_FAULT that kills B) and a failed side stops the comparison; bad usage exits 2.
source "$(dirname "$0")/common.sh"
AB=$SRC/scripts/ab.sh
args=(-- --config "$TINY" --set mesh.ep=2)

"$AB" --a "$MOEBENCH" --b "$MOEBENCH" --np 2 --rounds 2 --out "$WORK/ab" "${args[@]}" \
  > "$WORK/out.txt" 2> "$WORK/err.txt" || { cat "$WORK/out.txt" "$WORK/err.txt"; fail "ab.sh failed"; }
cat "$WORK/out.txt"
for f in a_1 b_1 a_2 b_2; do [ -s "$WORK/ab/$f.json" ] || fail "no $f.json"; done
grep -q "round 2/2 done (b a)" "$WORK/err.txt" || fail "round 2 did not run B first"
grep -qE '^ +median ' "$WORK/out.txt" || fail "no median row"
grep -q "^# digests: bitwise identical results" "$WORK/ab/compare.txt" ||
  { cat "$WORK/ab/compare.txt"; fail "same binary and seed: digests should be identical"; }
echo "ok: two rounds alternate, tabled, compared bitwise identical"

set +e
"$AB" --a "$MOEBENCH" --b "$MOEBENCH" --env-b MOE_FAULT=0:1:exit --np 2 --rounds 1 \
  --timeout 120 --out "$WORK/fault" "${args[@]}" > "$WORK/out2.txt" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { cat "$WORK/out2.txt"; fail "exit $rc with B killed, want 2"; }
grep -q "round 1, B failed" "$WORK/out2.txt" || { cat "$WORK/out2.txt"; fail "failure not named"; }
[ -s "$WORK/fault/a_1.json" ] || fail "A's run should have finished"
echo "ok (2): --env-b reached B only, and B's failure stopped the comparison"

# --set-b reaches B's runs only: A keeps the default gradients, B records bf16 ones, and
# compare.txt names the differing key instead of comparing.
"$AB" --a "$MOEBENCH" --b "$MOEBENCH" --set-b expert_grad_dtype=bf16 --np 2 --rounds 1 \
  --out "$WORK/set" "${args[@]}" > "$WORK/out4.txt" 2>&1 || { cat "$WORK/out4.txt"; fail "--set-b run"; }
/usr/bin/python3 -c "
import json, sys
a, b = (json.load(open(f'{sys.argv[1]}/{s}_1.json'))['config']['expert_grad_dtype'] for s in 'ab')
sys.exit(0 if (a, b) == ('fp32', 'bf16') else f'FAIL: A {a}, B {b}')" "$WORK/set"
grep -q "config.expert_grad_dtype" "$WORK/set/compare.txt" || { cat "$WORK/set/compare.txt"; fail "compare.txt"; }
echo "ok: --set-b reached B only"

set +e
"$AB" --a "$MOEBENCH" --np 2 --out "$WORK/x" "${args[@]}" > "$WORK/out3.txt" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q -- "--a and --b" "$WORK/out3.txt" || { cat "$WORK/out3.txt"; fail "usage"; }
echo "ok (2): a missing --b is refused"
