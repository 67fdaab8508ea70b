#!/usr/bin/env bash
# A rank that fails mid-run, by an error or by dying outright, ends the whole job quickly with a
# non-zero status: no other rank waits forever, and no result file is written.
source "$(dirname "$0")/common.sh"
for how in throw exit; do
  set +e
  start=$SECONDS
  out=$(MOE_FAULT=2:3:$how timeout 120 mpirun --oversubscribe -np 4 "$MOEBENCH" run \
    --config "$TINY" -q --set mesh.ep=2 --steps 10 --out "$WORK/r.json" 2>&1)
  rc=$?
  set -e
  echo "$how: rc=$rc after $((SECONDS - start)) s"
  [ $rc -ne 0 ] || fail "$how: the job exited 0"
  [ $rc -ne 124 ] || { echo "$out"; fail "$how: the job hung"; }
  [ ! -e "$WORK/r.json" ] || fail "$how: a result file was written"
  if [ $how = throw ]; then
    grep -q "rank 2: check failed: .*fault injected" <<< "$out" ||
      { echo "$out"; fail "throw: the error does not name rank 2"; }
  fi
done
echo "rank_failure: PASS"
