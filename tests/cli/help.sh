#!/usr/bin/env bash
# Help never does work: every script in scripts/ and moebench answer --help and -h with their usage
# on stdout and exit 0, and create nothing (in the folder they run in, TMPDIR, HOME, the checkout);
# an unknown option exits 2 with the usage on stderr; --version names the version and commit; a
# mistyped subcommand is named with a suggestion.
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

# moebench: help before MPI starts (no session directory left in TMPDIR), defaults and examples.
for args in "--help" "-h" "run --help" "compare --help" "keys --help" "gemm --help" "dispatch --help" "list --help"; do
  rc=0
  sandboxed "$MOEBENCH" $args || rc=$?
  [ $rc -eq 0 ] && grep -q "Usage:" "$WORK/out.txt" || { cat "$WORK/out.txt" "$WORK/err.txt"; fail "moebench $args: exit $rc"; }
  nothing_created "moebench $args"
done
sandboxed "$MOEBENCH" run --help
for want in "=auto" "--timeout-s FLOAT:FLOAT in [0.001 - 604800]=300" "--log-level TEXT:{trace,debug,info,warn,error}=info" \
  "Examples:" "mpirun -np 4 moebench run --config configs/quickstart.json" "--dry-run --world 8"; do
  grep -qF -- "$want" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "run --help lacks '$want'"; }
done
sandboxed "$MOEBENCH" dispatch --help
for want in "--tokens" "--dispatchers" "--iters INT:INT in [1 - 100000]=20" "Examples:" \
  "mpirun -np 2 moebench dispatch --config bench/deepseek_v3"; do
  grep -qF -- "$want" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "dispatch --help lacks '$want'"; }
done
sandboxed "$MOEBENCH" gemm --help
for want in "--rows TEXT:{balanced,routed}=balanced" "Examples:" "moebench gemm --config bench/deepseek_v3"; do
  grep -qF -- "$want" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "gemm --help lacks '$want'"; }
done
rc=0
sandboxed "$MOEBENCH" gemm --config "$TINY" --rows even || rc=$?
[ $rc -eq 2 ] && grep -qF -- "--rows: even not in {balanced,routed}" "$WORK/err.txt" ||
  { cat "$WORK/out.txt" "$WORK/err.txt"; fail "gemm --rows even: exit $rc"; }
# A bad workload is named as run names it, before the GPU is asked for.
rc=0
sandboxed "$MOEBENCH" gemm --config "$TINY" --set model.topk=99 || rc=$?
[ $rc -eq 2 ] && grep -qF "model.topk = 99 exceeds model.experts" "$WORK/err.txt" ||
  { cat "$WORK/out.txt" "$WORK/err.txt"; fail "gemm with topk 99: exit $rc"; }
# scripts/torch_grouped_mm.py, the peer figure: the shapes it would time, without torch: balanced
# rows from a workload, or exactly the rows of a `moebench gemm --out` file; anything else refused
# with exit 2 and the reason.
TG="$SRC/scripts/torch_grouped_mm.py"
python3 "$TG" "$SRC/configs/bench/deepseek_v3.json" --ep 2 --shapes >"$WORK/out.txt" 2>&1 ||
  { cat "$WORK/out.txt"; fail "torch_grouped_mm.py --shapes: exit $?"; }
grep -qF "128 local experts x 256-256 rows (mean 256.0; balanced), H 7168, F 2048" "$WORK/out.txt" ||
  { cat "$WORK/out.txt"; fail "torch_grouped_mm.py: DeepSeek-V3's balanced shapes at ep 2"; }
cat >"$WORK/gemm.json" <<'JSON'
{"command": "gemm", "config": {"name": "t", "model": {"hidden": 64, "ffn": 32}}, "ep": 2,
 "rows": [16, 0, 48, 768], "rows_from": "routed", "ep_rank": 1}
JSON
python3 "$TG" --rows-from "$WORK/gemm.json" --shapes >"$WORK/out.txt" 2>&1 ||
  { cat "$WORK/out.txt"; fail "torch_grouped_mm.py --rows-from: exit $?"; }
grep -qF "t at ep 2: 4 local experts x 0-768 rows (mean 208.0; routed, EP rank 1, from gemm.json), H 64, F 32" \
  "$WORK/out.txt" && grep -qx "rows 16 0 48 768" "$WORK/out.txt" ||
  { cat "$WORK/out.txt"; fail "torch_grouped_mm.py --rows-from: the file's rows"; }
echo '{"timing": {}}' >"$WORK/run.json"
for bad in "--rows-from $WORK/run.json|not a \`moebench gemm --out\` file" \
  "--rows-from $WORK/missing.json|cannot read it as JSON" \
  "--rows-from $WORK/gemm.json --ep 2|--ep and --tokens come from the --rows-from file" \
  "$SRC/configs/tiny.json --rows-from $WORK/gemm.json|not both or neither"; do
  rc=0
  python3 "$TG" ${bad%%|*} --shapes >"$WORK/out.txt" 2>&1 || rc=$?
  [ $rc -eq 2 ] && grep -qF -- "${bad#*|}" "$WORK/out.txt" ||
    { cat "$WORK/out.txt"; fail "torch_grouped_mm.py ${bad%%|*}: exit $rc"; }
done
# A NaN passes a plain range check (every comparison with it is false): refused by name.
for args in "run --config $TINY --timeout-s nan|--timeout-s: Value nan not in range" \
  "dispatch --config $TINY --timeout-s nan|--timeout-s: Value nan not in range" \
  "compare a.json b.json --threshold nan|--threshold: Value nan not in range"; do
  rc=0
  sandboxed "$MOEBENCH" ${args%%|*} || rc=$?
  [ $rc -eq 2 ] && grep -qF -- "${args#*|}" "$WORK/err.txt" ||
    { cat "$WORK/out.txt" "$WORK/err.txt"; fail "moebench ${args%%|*}: exit $rc"; }
done
sandboxed "$MOEBENCH" --version || fail "--version: exit $?"
grep -qE '^moebench [0-9]+\.[0-9]+\.[0-9]+$' "$WORK/out.txt" && grep -qE '^commit ([0-9a-f]{40}|unknown)' "$WORK/out.txt" &&
  grep -qE '^backends: cpu' "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "--version"; }
nothing_created "moebench --version"

# A mistyped subcommand: named, with the likely one, exit 2, under mpirun printed once.
for typo in "runn run" "cmopare compare" "kyes keys"; do
  set -- $typo
  rc=0
  sandboxed "$MOEBENCH" "$1" --config "$TINY" || rc=$?
  [ $rc -eq 2 ] && grep -qF "unknown subcommand '$1'; did you mean '$2'" "$WORK/err.txt" ||
    { cat "$WORK/out.txt" "$WORK/err.txt"; fail "moebench $1: exit $rc"; }
done
rc=0
sandboxed "$MOEBENCH" frobnicate || rc=$?
[ $rc -eq 2 ] && grep -qF "unknown subcommand 'frobnicate'; the subcommands are run, compare, gemm, dispatch, keys, list" "$WORK/err.txt" ||
  { cat "$WORK/err.txt"; fail "moebench frobnicate: exit $rc"; }
rc=0
mpi 2 runn --config "$TINY" >"$WORK/np2.txt" 2>&1 || rc=$?
[ $rc -ne 0 ] && [ "$(grep -c "unknown subcommand 'runn'" "$WORK/np2.txt")" -eq 1 ] ||
  { cat "$WORK/np2.txt"; fail "mpirun -np 2 moebench runn: exit $rc, or not printed once"; }
echo "help: PASS"
