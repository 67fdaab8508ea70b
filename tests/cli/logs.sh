#!/usr/bin/env bash
# Logs that read well in files: on stderr (stdout holds the report), no ANSI colour where stderr is
# not a terminal (under mpirun a rank's stdout is a pseudo-terminal even when mpirun writes to a
# file) nor with NO_COLOR set; -q leaves errors and the report; a progress line names the check
# before the reference runs.
source "$(dirname "$0")/../mpi/common.sh"
export TERM=xterm  # a colour terminal's name: only the streams themselves may turn colour off
has_esc() { grep -q $'\x1b' "$1"; }

TERM=xterm mpi 2 run --config "$TINY" --set mesh.ep=2 >"$WORK/out.txt" 2>"$WORK/err.txt" ||
  { cat "$WORK/out.txt" "$WORK/err.txt"; fail "the run failed"; }
! has_esc "$WORK/out.txt" && ! has_esc "$WORK/err.txt" || { cat -v "$WORK/out.txt" "$WORK/err.txt"; fail "ESC bytes in a piped run's output"; }
grep -q "info: checking step 1 against the float64 CPU reference: out, dx, p, dw_gate, dw_in, dw_out" "$WORK/err.txt" &&
  grep -q "may take a while" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "no progress line before the check"; }
! grep -q " info: " "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "log lines on stdout"; }
grep -q '^# check: .* PASS' "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "no report on stdout"; }
# The progress line comes before the check's result and the report.
[ "$(grep -n 'checking step' "$WORK/err.txt" | cut -d: -f1)" -lt "$(grep -n 'step 5/5' "$WORK/err.txt" | cut -d: -f1)" ] ||
  { cat "$WORK/err.txt"; fail "the progress line is not before the last step"; }

# On a terminal (script(1) gives the run a pseudo-terminal): colour, unless NO_COLOR is set.
if command -v script >/dev/null; then
  script -qec "'$MOEBENCH' run --config '$TINY' --steps 1 --warmup 0" /dev/null >"$WORK/tty.txt" 2>&1 ||
    { cat "$WORK/tty.txt"; fail "the run on a terminal failed"; }
  has_esc "$WORK/tty.txt" || { cat -v "$WORK/tty.txt"; fail "no colour on a terminal"; }
  NO_COLOR=1 script -qec "'$MOEBENCH' run --config '$TINY' --steps 1 --warmup 0" /dev/null >"$WORK/tty.txt" 2>&1 ||
    { cat "$WORK/tty.txt"; fail "the run with NO_COLOR failed"; }
  ! has_esc "$WORK/tty.txt" || { cat -v "$WORK/tty.txt"; fail "colour with NO_COLOR=1"; }
  grep -q "info: checking step" "$WORK/tty.txt" || fail "no log lines on the terminal"
else
  echo "logs: script(1) is missing: the terminal cases are skipped"
fi

# -q: the report and errors only.
mpi 2 run --config "$TINY" --set mesh.ep=2 -q >"$WORK/q.txt" 2>&1 || { cat "$WORK/q.txt"; fail "-q run failed"; }
! grep -qE " (info|warning|debug): " "$WORK/q.txt" || { cat "$WORK/q.txt"; fail "-q printed log lines"; }
grep -q '^  step ' "$WORK/q.txt" && grep -q '^# check: .* PASS' "$WORK/q.txt" || { cat "$WORK/q.txt"; fail "-q lost the report"; }
rc=0
mpi 2 run --config "$TINY" --set mesh.ep=3 -q >"$WORK/qbad.txt" 2>&1 || rc=$?
[ $rc -ne 0 ] && grep -q "error: .*mesh.ep" "$WORK/qbad.txt" || { cat "$WORK/qbad.txt"; fail "-q hid an error (exit $rc)"; }
# A --log-level beside -q wins.
mpi 1 run --config "$TINY" -q --log-level info >"$WORK/qi.txt" 2>&1 || fail "-q --log-level info"
grep -q " info: checking step" "$WORK/qi.txt" || { cat "$WORK/qi.txt"; fail "--log-level info beside -q"; }
echo "logs: PASS"
