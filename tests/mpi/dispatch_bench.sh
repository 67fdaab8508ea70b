#!/usr/bin/env bash
# `moebench dispatch` on the CPU backend: every dispatcher at two sizes, its JSON's figures
# consistent with each other, its bytes exactly those the step's dispatcher sends on the same
# routing (a one-step run's a2a phases), dedup never above alltoall, FP8 dispatch's smaller rows,
# ep 1 with nothing on a wire, graph leaving out what it refuses, and bad input refused on every
# rank with exit 2 and no result file.
source "$(dirname "$0")/common.sh"
args=(dispatch --config "$TINY" --set mesh.ep=2 --iters 3 --warmup 1)
mpi 2 "${args[@]}" --tokens 16,32 --out "$WORK/d.json" >"$WORK/d.txt"
grep -q "^# dispatcher .* busbw GB/s" "$WORK/d.txt" || { cat "$WORK/d.txt"; fail "no table header"; }
[ "$(grep -c "^  alltoall_dedup *32  dispatch_fwd" "$WORK/d.txt")" = 1 ] ||
  { cat "$WORK/d.txt"; fail "no dedup row at 32 tokens"; }
# The step itself on the same routing: one timed step, no warm-up, is step 0, the bench's.
for d in alltoall allgather alltoall_dedup nvlink; do
  mpi 2 run --config "$TINY" -q --set mesh.ep=2 --set dispatch=$d --set tokens_per_rank=32 \
    --warmup 0 --steps 1 --set check=off --set roofline=false --out "$WORK/run-$d.json" >/dev/null
done
mpi 2 "${args[@]}" --tokens 32 --set dispatch_dtype=fp8 --set precision=fp8_block --set align=16 \
  --out "$WORK/fp8.json" >/dev/null
mpi 2 "${args[@]}" --tokens 32 --set align=16 --out "$WORK/bf16a16.json" >/dev/null
mpi 1 dispatch --config "$TINY" --iters 2 --warmup 0 --out "$WORK/ep1.json" >/dev/null

/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
from checks import check
load = lambda n: json.load(open(f"{work}/{n}.json"))
d = load("d")
dirs = ("dispatch_fwd", "combine_fwd", "combine_bwd", "dispatch_bwd")
got = [(r["dispatcher"], r["tokens_per_rank"]) for r in d["results"]]
names = ("alltoall", "allgather", "alltoall_dedup", "nvlink")
want = [(n, t) for t in (16, 32) for n in names]
check(got == want, f"results {got}, want {want}")
check(d["mesh"] == {"world": 2, "ep": 2, "fsdp": 1}, f"mesh {d['mesh']}")
check("dispatch" not in d["config"] and "tokens_per_rank" not in d["config"],
      "config names one dispatcher or size for results of several")
check(d["provenance"]["backend"] == "cpu", "provenance backend")
for r in d["results"]:
    name = f"{r['dispatcher']}@{r['tokens_per_rank']}"
    check(r["layout_ms"] > 0 and r["rows_per_token"] > 0, f"{name}: layout {r}")
    for n in dirs:
        o = r["directions"][n]
        check(o["bytes_to_others"] > 0, f"{name} {n}: no bytes to others")
        check(0 < o["wire_ms"] <= o["ms"] * 1.0001 + 1e-6, f"{name} {n}: wire {o['wire_ms']} ms, all {o['ms']}")
        check(abs(o["busbw_gbps"] - o["bytes_to_others"] / (o["wire_ms"] * 1e6)) <= 1e-9 * o["busbw_gbps"],
              f"{name} {n}: busbw is not bytes / wire time")
        check(o["alltoall_ms"] > 0 and o["alltoall_busbw_gbps"] > 0, f"{name} {n}: no all-to-all")
        # nvlink's row moves are set against plain copies of the same bytes into peer memory.
        copy = o.get("peer_copy_gbps", 0)
        check((copy > 0) == (r["dispatcher"] == "nvlink"), f"{name} {n}: peer copy {copy}")
by = {(r["dispatcher"], r["tokens_per_rank"]): r for r in d["results"]}
for t in (16, 32):
    check(by[("alltoall_dedup", t)]["rows_per_token"] <= by[("alltoall", t)]["rows_per_token"],
          f"dedup sends more rows per token than alltoall at {t}")
    check(by[("nvlink", t)]["rows_per_token"] == by[("alltoall_dedup", t)]["rows_per_token"],
          f"nvlink does not move dedup's rows at {t}")
# The same dispatcher on the same routing as the step: the bytes each direction sends.
for n in names:
    run = load(f"run-{n}")["timing"]["phases"]
    for k in dirs:
        step_bytes = run["a2a_" + k]["bytes_sent_per_rank"]
        bench_bytes = by[(n, 32)]["directions"][k]["bytes_to_others"]
        check(step_bytes == bench_bytes, f"{n} {k}: bench {bench_bytes} bytes, step {step_bytes}")
# FP8 dispatch: the same rows, packed, in the dispatch direction only.
fp8, bf16 = ({r["dispatcher"]: r for r in load(x)["results"]} for x in ("fp8", "bf16a16"))
for n in fp8:
    a, b = fp8[n]["directions"], bf16[n]["directions"]
    check(0 < a["dispatch_fwd"]["bytes_to_others"] < b["dispatch_fwd"]["bytes_to_others"],
          f"{n}: fp8 dispatch sends {a['dispatch_fwd']['bytes_to_others']} bytes, bf16 {b['dispatch_fwd']['bytes_to_others']}")
    check(a["combine_fwd"]["bytes_to_others"] == b["combine_fwd"]["bytes_to_others"],
          f"{n}: fp8 dispatch changed the combine's bytes")
# ep 1: every direction runs, nothing crosses a wire.
e = load("ep1")
check(e["mesh"]["ep"] == 1 and len(e["results"]) == len(names), f"ep 1 results {len(e['results'])}")
for r in e["results"]:
    for k in dirs:
        o = r["directions"][k]
        check(o["bytes_to_others"] == 0 and o["busbw_gbps"] == 0 and o["alltoall_ms"] == 0,
              f"ep 1 {r['dispatcher']} {k}: {o}")
print("dispatch bench JSON: ok")
PY

# graph true at ep 2 takes allgather and nvlink only: the others are left out, each with its
# reason.
mpi 2 "${args[@]}" --set graph=true --out "$WORK/graph.json" >"$WORK/graph.txt" 2>"$WORK/graph.err"
[ "$(/usr/bin/python3 -c "import json; print(','.join(r['dispatcher'] for r in json.load(open('$WORK/graph.json'))['results']))")" = allgather,nvlink ] ||
  fail "graph true measured other than allgather and nvlink"
[ "$(grep -c "left out: dispatcher .* graph = true" "$WORK/graph.err")" = 2 ] ||
  { cat "$WORK/graph.err"; fail "graph true does not say what it left out"; }

# Bad input: refused on every rank, exit 2, the message naming the fix, no result file.
refused() {
  local want=$1
  shift
  set +e
  mpi 2 "${args[@]}" "$@" --out "$WORK/bad.json" >"$WORK/bad.txt" 2>&1
  local rc=$?
  set -e
  [ $rc -eq 2 ] || { cat "$WORK/bad.txt"; fail "$* exited $rc, not 2"; }
  grep -q -- "$want" "$WORK/bad.txt" || { cat "$WORK/bad.txt"; fail "$*: no '$want'"; }
  [ ! -e "$WORK/bad.json" ] || fail "$*: a result file after a refusal"
}
refused 'expected one of "alltoall", "allgather", "alltoall_dedup", "nvlink", got "bogus"' --dispatchers allgather,bogus
refused 'dispatcher alltoall_dedup at 32 tokens per rank: graph = true' --set graph=true --dispatchers alltoall_dedup
refused 'Value 0 not in range' --tokens 16,0
refused 'model.experts' --set model.experts=7
echo "dispatch bench: ok"
