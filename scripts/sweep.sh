#!/usr/bin/env bash
# Sweeps workload keys over lists of values: one `mpirun -np NP moebench run` per point of the
# Cartesian product of the axes, each point's result JSON and log under
# OUT/NAME/<commit>[-dirty]/, with an index.json that scripts/report.py reads, and the points'
# headline figures as results.csv and results.jsonl (one row per point).
#   scripts/sweep.sh --name NAME --config FILE --np NP --axis KEY=V1,V2,... [--axis ...]
#                    [--set KEY=VALUE ...] [--bin BIN] [--out DIR] [--backend auto|cpu|cuda]
#                    [--timeout S] [-- extra moebench args]
# Resumable: a point whose JSON exists and reads as a result is skipped, so re-running the same
# command runs only what is missing or failed; a sweep folder refuses a re-run with other settings.
# `np` as an axis key sweeps the number of ranks. Environment: MPIRUN (default
# "mpirun --oversubscribe"); as root Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 and
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3

usage() {
  cat <<'EOF'
usage: scripts/sweep.sh --name NAME --config FILE --np NP --axis KEY=V1,V2,... [--axis ...]
                        [--set KEY=VALUE ...] [--bin BIN] [--out DIR] [--backend auto|cpu|cuda]
                        [--timeout S] [-- extra moebench args]
  --name NAME      sweep name: results go to OUT/NAME/<git short hash>[-dirty]/
  --config FILE    workload JSON (moebench --config)
  --np NP          MPI ranks per point (or sweep them: --axis np=1,2,4)
  --axis K=V,...   a workload key (dotted, as for --set) and its values; several --axis give the
                   Cartesian product, the first axis varying slowest
  --set K=V        fixed override for every point (repeatable)
  --bin BIN        moebench binary (default: build/moebench of this repo)
  --out DIR        results root (default: results/ of this repo)
  --backend B      passed to moebench as --backend B (default: moebench's own, auto)
  --timeout S      kill a point after S seconds (default 0: no limit)
  -- ARGS          passed to moebench run as they are (e.g. -- --steps 50 --warmup 5)
Sweeping mesh.ep without mesh.fsdp (or the reverse) adds --set mesh.fsdp=auto (mesh.ep=auto), so
that ep x fsdp = np holds at every point.
EOF
}
die() { echo "sweep.sh: $*" >&2; echo "(scripts/sweep.sh --help for usage)" >&2; exit 2; }
abspath() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
is_posint() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }

NAME="" CONFIG="" NP="" BIN="$ROOT/build/moebench" OUT="$ROOT/results" BACKEND="" TIMEOUT=0
AXIS_KEYS=() AXIS_VALS=() SETS=() EXTRA=()
need() { [ $# -ge 2 ] || die "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --name) need "$@"; NAME=$2; shift ;;
    --config) need "$@"; CONFIG=$2; shift ;;
    --np) need "$@"; NP=$2; shift ;;
    --bin) need "$@"; BIN=$2; shift ;;
    --out) need "$@"; OUT=$2; shift ;;
    --backend) need "$@"; BACKEND=$2; shift ;;
    --timeout) need "$@"; TIMEOUT=$2; shift ;;
    --set) need "$@"; SETS+=("$2"); shift ;;
    --axis)
      need "$@"
      [[ $2 == *=* ]] || die "--axis $2: expected KEY=V1,V2,..."
      key=${2%%=*} vals=${2#*=}
      [[ $key =~ ^[A-Za-z_][A-Za-z0-9_.]*$ ]] || die "--axis $2: bad key '$key'"
      [ -n "$vals" ] || die "--axis $2: no values"
      [[ ",$vals," != *,,* ]] || die "--axis $2: an empty value in the list"
      for k in "${AXIS_KEYS[@]}"; do [ "$k" != "$key" ] || die "--axis $key given twice"; done
      AXIS_KEYS+=("$key") AXIS_VALS+=("$vals")
      shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "sweep.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

[ -n "$NAME" ] || die "--name is required"
[[ $NAME =~ ^[A-Za-z0-9._-]+$ && $NAME != .* ]] || die "--name '$NAME': use letters, digits, . _ -"
[ -n "$CONFIG" ] || die "--config is required"
[ -f "$CONFIG" ] || die "--config $CONFIG: no such file"
[ ${#AXIS_KEYS[@]} -gt 0 ] || die "at least one --axis KEY=V1,V2,... is required"
NP_AXIS=-1
for i in "${!AXIS_KEYS[@]}"; do
  if [ "${AXIS_KEYS[$i]}" = np ]; then
    NP_AXIS=$i
    IFS=, read -r -a vs <<< "${AXIS_VALS[$i]}"
    for v in "${vs[@]}"; do is_posint "$v" || die "--axis np: '$v' is not a positive integer"; done
  fi
done
if [ "$NP_AXIS" -ge 0 ]; then
  [ -z "$NP" ] || die "--np and --axis np=... both given: keep one"
else
  [ -n "$NP" ] || die "--np is required (or sweep it: --axis np=1,2,4)"
  is_posint "$NP" || die "--np $NP: expected a positive integer"
fi
is_posint "$TIMEOUT" || [ "$TIMEOUT" = 0 ] || die "--timeout $TIMEOUT: expected seconds (0 = none)"
case $BACKEND in ""|auto|cpu|cuda) ;; *) die "--backend $BACKEND: expected auto, cpu or cuda" ;; esac
for s in "${SETS[@]}"; do
  [[ $s == *=* ]] || die "--set $s: expected KEY=VALUE"
  for k in "${AXIS_KEYS[@]}"; do
    [ "${s%%=*}" != "$k" ] || die "$k is both an --axis and a --set: keep one"
  done
done
[ -x "$BIN" ] || die "--bin $BIN: not an executable (build first: cmake -S . -B build && cmake --build build -j)"
CONFIG=$(abspath "$CONFIG") BIN=$(abspath "$BIN") OUT=$(abspath "$OUT")

# The mesh: sweeping one of mesh.ep / mesh.fsdp alone makes the other auto (= np / the swept one),
# unless it is set by --set or after --.
is_axis() { local a; for a in "${AXIS_KEYS[@]}"; do [ "$a" != "$1" ] || return 0; done; return 1; }
has_key() {  # has_key KEY: an axis, a --set or an extra argument sets KEY
  local a
  is_axis "$1" && return 0
  for a in "${SETS[@]}" "${EXTRA[@]}"; do [[ $a != "$1="* ]] || return 0; done
  return 1
}
AUTO_SETS=()
for pair in mesh.ep:mesh.fsdp mesh.fsdp:mesh.ep; do
  swept=${pair%:*} other=${pair#*:}
  if is_axis "$swept" && ! has_key "$other"; then
    AUTO_SETS+=("$other=auto")
    echo "sweep: $swept is swept and $other is not set: adding --set $other=auto ($other = np / $swept)"
  fi
done

# The Cartesian product, first axis slowest; a point is its values joined by US (\x1f).
US=$'\x1f'
POINTS=("")
for i in "${!AXIS_KEYS[@]}"; do
  IFS=, read -r -a vs <<< "${AXIS_VALS[$i]}"
  next=()
  for p in "${POINTS[@]}"; do
    for v in "${vs[@]}"; do next+=("$p$US$v"); done
  done
  POINTS=("${next[@]}")
done
TOTAL=${#POINTS[@]}
point_name() {  # point_name P: KEY=VALUE,... of point P, filename-safe
  local vals i name=""
  IFS=$US read -r -a vals <<< "${1#"$US"}"
  for i in "${!AXIS_KEYS[@]}"; do name+="${name:+,}${AXIS_KEYS[$i]}=${vals[$i]}"; done
  echo "${name//[^A-Za-z0-9._=,+-]/_}"
}
SEEN=" "
for p in "${POINTS[@]}"; do
  point=$(point_name "$p")
  [[ $SEEN != *" $point "* ]] || die "two points share the name $point: a value repeats, or two differ only in characters a file name cannot hold"
  SEEN+="$point "
done

# Commit: as moebench records it. A tree sent to a GPU machine names its commit in BUILD_COMMIT
# ("<sha> <dirty 0|1>"), which wins over whatever git metadata the copy has; else git.
if [ -f "$ROOT/BUILD_COMMIT" ]; then
  read -r SHA DIRTY < "$ROOT/BUILD_COMMIT"
  export MOE_GIT_COMMIT=$SHA MOE_GIT_DIRTY=$DIRTY
elif SHA=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null); then
  DIRTY=0
  [ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] || DIRTY=1
else
  SHA=unknown DIRTY=0
fi
HASH=${SHA:0:7}
[ "$DIRTY" = 0 ] || HASH=$HASH-dirty
DIR=$OUT/$NAME/$HASH
mkdir -p "$DIR"
INDEX=$DIR/index.json
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}  # never NVLink multicast on the shared hosts
read -r -a MPIRUN_CMD <<< "${MPIRUN:-mpirun --oversubscribe}"

# JSON helpers (stdlib json only).
helper() { "$PY" - "$@" <<'PYEOF'
import json, os, sys

def load(path):
    with open(path) as f:
        return json.load(f)

def write_if_changed(path, obj):
    text = json.dumps(obj, indent=1) + "\n"
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "result":
    # result FILE: "median_ms commit dirty backend" when FILE reads as a moebench result, else exit 1
    try:
        d = load(args[0])
        med = float(d["timing"]["step"]["median"])
        p = d.get("provenance", {})
        print("%.2f %s %d %s" % (med, p.get("git_commit", "?"), bool(p.get("git_dirty")),
                                 p.get("backend", "?")))
    except Exception:
        sys.exit(1)
elif cmd == "settings":
    # settings SWEEP_JSON NAME SHA CONFIG NP BACKEND N AXIS_KEY... N SET... N EXTRA_ARG...
    path, name, sha, config, np, backend = args[:6]
    rest, lists = args[6:], []
    for _ in range(3):
        n = int(rest[0])
        lists.append(rest[1:1 + n])
        rest = rest[1 + n:]
    axes, sets, extra = lists
    try:
        workload = load(config)
    except Exception as e:
        sys.exit("sweep.sh: --config %s: %s" % (config, e))
    now = {"config": workload, "np": int(np) if np else None, "backend": backend or None,
           "axes": axes, "sets": sets, "extra_args": extra}
    if os.path.exists(path):
        try:
            before = load(path)["settings"]
        except Exception as e:
            sys.exit("sweep.sh: %s is unreadable (%s): remove it or the folder" % (path, e))
        diff = [k for k in now if now[k] != before.get(k)]
        if diff:
            msg = ["sweep.sh: %s was swept with other settings:" % os.path.dirname(path)]
            msg += ["  %s: then %s, now %s" % (k, json.dumps(before.get(k)), json.dumps(now[k]))
                    for k in diff]
            msg.append("Use another --name, or remove that folder to start again.")
            sys.exit("\n".join(msg))
    else:
        write_if_changed(path, {"name": name, "commit": sha, "folder": os.path.basename(
                                    os.path.dirname(os.path.abspath(path))), "config_path": config,
                                "settings": now})
elif cmd == "index":
    # index INDEX DIR POINT FILE LOG STATUS EXIT STEP_MS BACKEND KEY VALUE [KEY VALUE ...]
    path, folder, point, file, log, status, code, step, backend = args[:9]
    kv = args[9:]
    entry = {"point": point, "axes": dict(zip(kv[0::2], kv[1::2])), "file": file or None,
             "log": log or None, "status": status, "exit": int(code),
             "step_ms": float(step) if step else None, "backend": backend or None}
    index = []
    if os.path.exists(path):
        try:
            index = load(path)
            assert isinstance(index, list)
        except Exception:
            print("sweep.sh: %s is unreadable: starting a new one" % path, file=sys.stderr)
            index = []
    index = [e for e in index if isinstance(e, dict)]
    for e in index:  # points of earlier runs not in this one: is their result still there?
        if e.get("status") == "ok" and not os.path.exists(os.path.join(folder, e.get("file") or "")):
            e["status"] = "missing"
    at = [i for i, e in enumerate(index) if isinstance(e, dict) and e.get("point") == point]
    if at:
        index[at[0]] = entry
        index = [e for i, e in enumerate(index) if i not in at[1:]]
    else:
        index.append(entry)
    write_if_changed(path, index)
elif cmd == "tables":
    # tables INDEX DIR: DIR/results.csv and DIR/results.jsonl, one row per point of index.json:
    # the axes (typed: 16 is a number, true a boolean, sigmoid a string), then the point's status
    # and headline figures, empty (null) where the point has no result.
    import csv, io
    path, folder = args
    index = [e for e in load(path) if isinstance(e, dict)]
    axes = []
    for e in index:
        axes += [k for k in e.get("axes", {}) if k not in axes]
    fixed = ["point", "status", "exit", "world", "ep", "fsdp", "backend", "step_ms_median",
             "step_ms_p10", "step_ms_p90", "tflops_per_rank", "tokens_per_s", "check_status",
             "commit", "file"]

    def typed(text):
        if text in ("true", "false"):
            return text == "true"
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text

    rows = []
    for e in index:
        row = {k: typed(v) for k, v in e.get("axes", {}).items()}
        row.update({k: None for k in fixed})
        row.update(point=e.get("point"), status=e.get("status"), exit=e.get("exit"),
                   backend=e.get("backend"), file=e.get("file"))
        try:
            r = load(os.path.join(folder, e["file"])) if e.get("file") else None
        except Exception:
            r = None
        if isinstance(r, dict):
            step, mesh = r.get("timing", {}).get("step", {}), r.get("mesh", {})
            thr, prov = r.get("throughput", {}), r.get("provenance", {})
            row.update(world=mesh.get("world"), ep=mesh.get("ep"), fsdp=mesh.get("fsdp"),
                       backend=prov.get("backend", row["backend"]),
                       step_ms_median=step.get("median"), step_ms_p10=step.get("p10"),
                       step_ms_p90=step.get("p90"), tflops_per_rank=thr.get("tflops_per_rank"),
                       tokens_per_s=thr.get("tokens_per_s"),
                       check_status=r.get("correctness", {}).get("status"),
                       commit=prov.get("git_commit"))
        rows.append(row)
    lines = "".join(json.dumps(row) + "\n" for row in rows)
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=axes + fixed, lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: ("" if v is None else str(v).lower() if isinstance(v, bool) else v)
                    for k, v in row.items()})
    for name, text in (("results.jsonl", lines), ("results.csv", out.getvalue())):
        tmp = os.path.join(folder, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(folder, name))
PYEOF
}

# The settings every point shares: a sweep folder holds one set of them (so that resuming never
# mixes points run with different workloads). NP is empty when np is an axis.
helper settings "$DIR/sweep.json" "$NAME" "$SHA" "$CONFIG" "$NP" "$BACKEND" \
  ${#AXIS_KEYS[@]} "${AXIS_KEYS[@]}" ${#SETS[@]} "${SETS[@]}" ${#EXTRA[@]} "${EXTRA[@]}" || exit 2

echo "sweep $NAME: $TOTAL points, commit $HASH, into $DIR"
[ "$DIRTY" = 0 ] || echo "sweep: the tree is dirty: points kept from an earlier run may come from other code"
n=0 ran=0 skipped=0 failed=0 warned_commit=0
FAILED=()
for p in "${POINTS[@]}"; do
  n=$((n + 1))
  IFS=$US read -r -a vals <<< "${p#"$US"}"
  label="" point_sets=() kv=() np=$NP
  for i in "${!AXIS_KEYS[@]}"; do
    k=${AXIS_KEYS[$i]} v=${vals[$i]}
    label+="${label:+ }$k=$v" kv+=("$k" "$v")
    if [ "$i" = "$NP_AXIS" ]; then np=$v; else point_sets+=(--set "$k=$v"); fi
  done
  point=$(point_name "$p")
  json=$DIR/$point.json log=$DIR/$point.log
  printf '[%d/%d] %s ... ' "$n" "$TOTAL" "$label"

  if info=$(helper result "$json"); then
    read -r step _ _ backend <<< "$info"
    echo "skipped (done: step $step ms)"
    skipped=$((skipped + 1))
    logname=""
    [ ! -f "$log" ] || logname=$point.log
    helper index "$INDEX" "$DIR" "$point" "$point.json" "$logname" ok 0 "$step" "$backend" "${kv[@]}"
    continue
  fi
  [ ! -e "$json" ] || { echo -n "(unreadable result, re-running) "; rm -f "$json"; }
  rm -f "$DIR/$point.failed.json"
  cmd=("${MPIRUN_CMD[@]}" -np "$np" "$BIN" run --config "$CONFIG" -q)
  [ -z "$BACKEND" ] || cmd+=(--backend "$BACKEND")
  for s in "${SETS[@]}" "${AUTO_SETS[@]}"; do cmd+=(--set "$s"); done
  cmd+=("${point_sets[@]}" "${EXTRA[@]}" --out "$json")
  [ "$TIMEOUT" = 0 ] || cmd=(timeout --kill-after=30 "$TIMEOUT" "${cmd[@]}")
  t0=$SECONDS
  { printf '#'; printf ' %q' "${cmd[@]}"; echo; } > "$log"
  set +e
  "${cmd[@]}" >> "$log" 2>&1 < /dev/null
  rc=$?
  set -e
  secs=$((SECONDS - t0))
  if [ $rc -eq 0 ] && info=$(helper result "$json"); then
    read -r step commit _ backend <<< "$info"
    echo "ok (step $step ms, ${secs}s)"
    ran=$((ran + 1))
    helper index "$INDEX" "$DIR" "$point" "$point.json" "$point.log" ok 0 "$step" "$backend" "${kv[@]}"
    if [ $warned_commit = 0 ] && [ "$SHA" != unknown ] && [ "$commit" != "$SHA" ]; then
      echo "sweep: warning: $BIN reports commit $commit, not this tree's $SHA (another checkout?)"
      warned_commit=1
    fi
    continue
  fi
  # Failed: a result it may have written (the check failed: exit 1) is kept aside as
  # POINT.failed.json, so that a re-run retries the point.
  case $rc in
    0) why="exit 0 but no readable result"; rc=3 ;;
    1) why="exit 1"; [ ! -f "$json" ] || why="exit 1: check failed" ;;
    2) why="exit 2: bad input" ;;
    124|137) why="exit $rc"; [ "$TIMEOUT" = 0 ] || why="timed out after ${TIMEOUT}s" ;;
    *) why="exit $rc" ;;
  esac
  file="" step="" backend=""
  if [ -f "$json" ]; then
    mv "$json" "$DIR/$point.failed.json"
    file=$point.failed.json
    if info=$(helper result "$DIR/$point.failed.json"); then read -r step _ _ backend <<< "$info"; fi
  fi
  echo "FAILED ($why, log $log)"
  # The error lines (moebench's, not mpirun's banner), else the log's end.
  msg=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E 'error|FAIL|# check:' | head -n 5 || true)
  [ -n "$msg" ] || msg=$(tail -n 5 "$log")
  echo "$msg" | sed 's/^/    | /'
  failed=$((failed + 1))
  FAILED+=("$label  ($why; $log)")
  helper index "$INDEX" "$DIR" "$point" "$file" "$point.log" failed "$rc" "$step" "$backend" "${kv[@]}"
done

# One row per point for spreadsheets, pandas and jq, rewritten whole after every sweep (resumed
# points included).
helper tables "$INDEX" "$DIR"
echo "sweep $NAME: $TOTAL points: $ran ran ok, $skipped skipped (already done), $failed failed"
for f in "${FAILED[@]}"; do echo "  failed: $f"; done
echo "index: $INDEX"
echo "tables: $DIR/results.csv, $DIR/results.jsonl"
REPORT=$ROOT/scripts/report.py
[ "$PWD" != "$ROOT" ] || REPORT=scripts/report.py
echo "report: $REPORT $DIR"
[ $failed -eq 0 ]
