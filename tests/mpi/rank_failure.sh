#!/usr/bin/env bash
# A rank that fails mid-run, by an error, by dying outright or by stopping (alive but stuck:
# SIGSTOP), ends the whole job quickly with a non-zero status: no other rank waits forever, and no
# result file is written.
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
# A stopped rank: the others give up after --timeout-s in the collective they wait in, name it,
# and abort the job (mpirun then kills the stopped one too). The outer timeout is only a safety
# net; the job must end well before it. Any process left behind is killed by its unique --out.
cleanup_stopped() { pkill -KILL -f "$WORK/stuck.json" 2>/dev/null || true; }
trap 'cleanup_stopped; rm -rf "$WORK"' EXIT
set +e
start=$SECONDS
out=$(MOE_FAULT=1:2:stop timeout 100 mpirun --oversubscribe -np 2 "$MOEBENCH" run \
  --config "$TINY" -q --set mesh.ep=2 --steps 10 --timeout-s 3 --out "$WORK/stuck.json" 2>&1)
rc=$?
set -e
took=$((SECONDS - start))
cleanup_stopped
echo "stop: rc=$rc after $took s"
[ $rc -ne 0 ] || fail "stop: the job exited 0"
[ $rc -ne 124 ] || { echo "$out"; fail "stop: the job hung until the safety net"; }
[ $took -lt 60 ] || { echo "$out"; fail "stop: took $took s for a 3 s bound"; }
grep -qE "rank 0: waited [0-9]+ s in .* longer than --timeout-s 3" <<< "$out" ||
  { echo "$out"; fail "stop: no message naming the waiting rank, the wait and the bound"; }
[ ! -e "$WORK/stuck.json" ] || fail "stop: a result file was written"
echo "rank_failure: PASS"
