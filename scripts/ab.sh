#!/usr/bin/env bash
# A against B on one machine: two moebench binaries (e.g. two commits' builds) run the same
# workload in alternating rounds (A B, then B A, ...), so that drift of the host (clocks, heat,
# other tenants) falls on both alike, then one compare of the rounds. Use it when a figure moved
# between sessions on different hosts and the question is whether the code moved it.
# usage: scripts/ab.sh --a BIN_A --b BIN_B --np NP --out DIR [--rounds N] [--env-a K=V]
#                      [--env-b K=V] [--set-a K=V] [--set-b K=V] [--timeout S] -- RUN ARGS...
# RUN ARGS go to `moebench run` unchanged (e.g. --config configs/bench/mixtral_8x7b.json
# --set mesh.ep=2). --env-a/--env-b (repeatable) set environment variables for one side only;
# --set-a/--set-b (repeatable) add `--set K=V` to one side's runs, so the same binary can be A and
# B with, e.g., --set-b gemm.algo=exact (a knob: compare.txt compares them) or --set-b
# expert_grad_dtype=bf16 (different work: compare.txt names the keys instead of comparing). Writes DIR/a_R.json,
# DIR/b_R.json and their logs, DIR/ab.txt (the table below) and DIR/compare.txt (`moebench
# compare` of A's and B's median rounds). Prints per round and in all the step medians, and B/A.
# Where the binaries cannot ask git for their commit (a tree copied to the GPU machine), set each
# side's provenance with --env-a MOE_GIT_COMMIT=<40-hex sha> and --env-b MOE_GIT_COMMIT=<40-hex sha>.
# Environment: MPIRUN (default "mpirun --oversubscribe").
set -euo pipefail

# The comment block above is the usage: --help prints it to stdout, a bad argument to stderr.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
die() { echo "ab.sh: $*" >&2; exit 2; }
bad_usage() { echo "ab.sh: $*" >&2; usage >&2; exit 2; }
need() { [ $# -ge 2 ] || die "$1 needs a value"; }

A="" B="" NP="" OUT="" ROUNDS=3 TIMEOUT=0 ENV_A=() ENV_B=() SET_A=() SET_B=() ARGS=()
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --a) need "$@"; A=$2; shift ;;
    --b) need "$@"; B=$2; shift ;;
    --np) need "$@"; NP=$2; shift ;;
    --out) need "$@"; OUT=$2; shift ;;
    --rounds) need "$@"; ROUNDS=$2; shift ;;
    --timeout) need "$@"; TIMEOUT=$2; shift ;;
    --env-a) need "$@"; [[ $2 == *=* ]] || die "--env-a $2: expected KEY=VALUE"; ENV_A+=("$2"); shift ;;
    --env-b) need "$@"; [[ $2 == *=* ]] || die "--env-b $2: expected KEY=VALUE"; ENV_B+=("$2"); shift ;;
    --set-a) need "$@"; [[ $2 == *=* ]] || die "--set-a $2: expected KEY=VALUE"; SET_A+=(--set "$2"); shift ;;
    --set-b) need "$@"; [[ $2 == *=* ]] || die "--set-b $2: expected KEY=VALUE"; SET_B+=(--set "$2"); shift ;;
    --) shift; ARGS=("$@"); break ;;
    *) bad_usage "unknown option $1 (run arguments go after --)" ;;
  esac
  shift
done
[ -n "$A" ] && [ -n "$B" ] || die "--a and --b (moebench binaries) are required"
for bin in "$A" "$B"; do [ -x "$bin" ] || die "$bin is not an executable moebench binary"; done
[[ $NP =~ ^[1-9][0-9]*$ ]] || die "--np: a positive number of ranks, got '$NP'"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds: a positive number, got '$ROUNDS'"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "--timeout: seconds, got '$TIMEOUT'"
[ -n "$OUT" ] || die "--out DIR is required"
[ ${#ARGS[@]} -gt 0 ] || die "no run arguments: add -- --config FILE ..."
mkdir -p "$OUT"
read -r -a MPI <<< "${MPIRUN:-mpirun --oversubscribe}"

# run_side SIDE ROUND: one run of A or B; a failed run stops the comparison.
run_side() {
  local side=$1 round=$2 bin envs=() sets=()
  if [ "$side" = a ]; then
    bin=$A; envs=("${ENV_A[@]+"${ENV_A[@]}"}"); sets=("${SET_A[@]+"${SET_A[@]}"}")
  else
    bin=$B; envs=("${ENV_B[@]+"${ENV_B[@]}"}"); sets=("${SET_B[@]+"${SET_B[@]}"}")
  fi
  local json=$OUT/${side}_$round.json log=$OUT/${side}_$round.log xs=()
  for kv in "${envs[@]+"${envs[@]}"}"; do xs+=(-x "${kv%%=*}"); done
  local t=()
  [ "$TIMEOUT" -gt 0 ] && t=(timeout -k 5 "$TIMEOUT")
  if ! env "${envs[@]+"${envs[@]}"}" "${t[@]+"${t[@]}"}" "${MPI[@]}" "${xs[@]+"${xs[@]}"}" \
      -np "$NP" "$bin" run -q --out "$json" "${ARGS[@]}" "${sets[@]+"${sets[@]}"}" > "$log" 2>&1; then
    tail -20 "$log" >&2
    die "round $round, ${side^^} failed (log: $log)"
  fi
}

for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then order="a b"; else order="b a"; fi
  for side in $order; do run_side "$side" "$r"; done
  echo "ab.sh: round $r/$ROUNDS done ($order)" >&2
done

/usr/bin/python3 - "$OUT" "$ROUNDS" > "$OUT/ab.txt" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def step(side, r):
    with open(f"{out}/{side}_{r}.json") as f:
        return json.load(f)["timing"]["step"]["median"]
a = [step("a", r) for r in range(1, rounds + 1)]
b = [step("b", r) for r in range(1, rounds + 1)]
print("# step median ms per round (A and B alternate: odd rounds A first, even rounds B first)")
print(f"# {'round':>5} {'A':>10} {'B':>10} {'B/A':>7}")
for r, (x, y) in enumerate(zip(a, b), 1):
    print(f"  {r:>5} {x:10.3f} {y:10.3f} {y / x:7.3f}")
ma, mb = statistics.median(a), statistics.median(b)
print(f"  {'median':>5} {ma:10.3f} {mb:10.3f} {mb / ma:7.3f}")
print(f"# B/A per round: min {min(y / x for x, y in zip(a, b)):.3f}, "
      f"max {max(y / x for x, y in zip(a, b)):.3f}")
# The round whose step is the side's median, for the phase-by-phase compare.
print("# median rounds:", a.index(sorted(a)[(rounds - 1) // 2]) + 1,
      b.index(sorted(b)[(rounds - 1) // 2]) + 1)
PY
read -r ra rb < <(sed -n 's/^# median rounds: //p' "$OUT/ab.txt")
"$B" compare "$OUT/a_$ra.json" "$OUT/b_$rb.json" > "$OUT/compare.txt" 2>&1 || true
cat "$OUT/ab.txt"
echo "# phase by phase (A's and B's median rounds): $OUT/compare.txt"
