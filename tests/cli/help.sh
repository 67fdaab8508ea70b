#!/usr/bin/env bash
# Help never does work: every script in scripts/ answers --help and -h with its usage on stdout and
# exits 0, and creates nothing (in the folder it runs in, TMPDIR, HOME, the checkout); an unknown
# option exits 2 with the usage on stderr.
source "$(dirname "$0")/../mpi/common.sh"
S=$WORK/sandbox
mkdir -p "$S/cwd" "$S/tmp" "$S/home"
# What the checkout holds beyond its tracked files (ignored folders such as build-gpu/ or
# __pycache__/ included), and its tracked files' changes: a script that builds or writes shows.
tree_state() { git -C "$SRC" status --porcelain --ignored 2>/dev/null || true; }
before=$(tree_state)
sandboxed() {  # sandboxed CMD...: run CMD in the sandbox, stdout to out.txt, stderr to err.txt
  (cd "$S/cwd" && TMPDIR=$S/tmp HOME=$S/home "$@") >"$WORK/out.txt" 2>"$WORK/err.txt"
}
nothing_created() {  # nothing_created WHAT
  local left
  left=$(find "$S" -mindepth 2)
  [ -z "$left" ] || fail "$1 created files: $left"
  [ "$(tree_state)" = "$before" ] || fail "$1 changed the checkout: $(diff <(echo "$before") <(tree_state))"
}

for script in "$SRC"/scripts/*.sh "$SRC"/scripts/*.py; do
  name=$(basename "$script")
  for flag in --help -h; do
    rc=0
    sandboxed "$script" $flag || rc=$?
    [ $rc -eq 0 ] || { cat "$WORK/out.txt" "$WORK/err.txt"; fail "$name $flag: exit $rc"; }
    grep -q "^usage: .*$name" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "$name $flag: no usage on stdout"; }
    [ ! -s "$WORK/err.txt" ] || { cat "$WORK/err.txt"; fail "$name $flag wrote to stderr"; }
    nothing_created "$name $flag"
  done
  # gpu_check.sh takes OUTDIR first: an unknown option after it must not create OUTDIR either.
  args=(--no-such-option)
  [ "$name" != gpu_check.sh ] || args=("$S/cwd/out" --no-such-option)
  rc=0
  sandboxed "$script" "${args[@]}" || rc=$?
  [ $rc -eq 2 ] || { cat "$WORK/out.txt" "$WORK/err.txt"; fail "$name --no-such-option: exit $rc, not 2"; }
  grep -q "usage: .*$name" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "$name: no usage on stderr for a bad option"; }
  [ ! -s "$WORK/out.txt" ] || { cat "$WORK/out.txt"; fail "$name: a bad option wrote to stdout"; }
  nothing_created "$name --no-such-option"
  echo "$name: help and a bad option ok"
done

echo "help: PASS"
