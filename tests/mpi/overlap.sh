#!/usr/bin/env bash
# overlap=dispatch_bwd changes the schedule, not the work: on ep 2 x fsdp 2 the check passes,
# the digests equal those of the plain schedule, the result's config names the overlap, dispatch_bwd is
# marked as running beside experts_bwd (JSON and text), with shared experts their forward beside
# dispatch_fwd (same bits again), compare takes the two runs side by side,
# and a bad value is refused on every rank with exit status 2.
source "$(dirname "$0")/common.sh"
args=(run --config "$TINY" -q --set mesh.ep=2 --set mesh.fsdp=2 --steps 2 --warmup 1
  --set router.aux_coeff=0.01)
mpi 4 "${args[@]}" --out "$WORK/plain.json" >/dev/null
mpi 4 "${args[@]}" --set overlap=dispatch_bwd --out "$WORK/beside.json" >"$WORK/beside.txt" ||
  { cat "$WORK/beside.txt"; fail "overlap=dispatch_bwd: the run failed"; }
grep -qE "^# check: [0-9]+/[0-9]+ PASS" "$WORK/beside.txt" || { cat "$WORK/beside.txt"; fail "no PASS"; }
grep -q "^# overlap: dispatch_bwd runs beside experts_bwd" "$WORK/beside.txt" ||
  { cat "$WORK/beside.txt"; fail "no '# overlap:' line"; }

/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
a, b = (json.load(open(f"{work}/{n}.json")) for n in ("plain", "beside"))
from checks import check
check(a["digests"] == b["digests"], "the overlap changed results")
check(a["config"]["overlap"] == "none", "plain run's overlap is not none")
check(b["config"]["overlap"] == "dispatch_bwd", "overlap not in the result's config")
check(b["timing"]["phases"]["dispatch_bwd"].get("beside") == "experts_bwd", "dispatch_bwd not beside")
check("beside" not in a["timing"]["phases"]["dispatch_bwd"], "plain run marks an overlap")
PY
# With shared experts the overlap also runs their forward beside dispatch_fwd: still the same
# bits, the shared gradients' digests included.
sh=(--set model.shared_experts=1 --set model.shared_ffn=40)
mpi 4 "${args[@]}" "${sh[@]}" --out "$WORK/sh_plain.json" >/dev/null
mpi 4 "${args[@]}" "${sh[@]}" --set overlap=dispatch_bwd --out "$WORK/sh_beside.json" \
  >"$WORK/sh_beside.txt" || { cat "$WORK/sh_beside.txt"; fail "shared experts beside: the run failed"; }
grep -q "^# overlap: shared_fwd runs beside dispatch_fwd" "$WORK/sh_beside.txt" ||
  { cat "$WORK/sh_beside.txt"; fail "no '# overlap: shared_fwd' line"; }
/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
a, b = (json.load(open(f"{work}/{n}.json")) for n in ("sh_plain", "sh_beside"))
if a["digests"] != b["digests"] or "dw_sh_in" not in a["digests"]:
    sys.exit(f"FAIL: shared digests {a['digests']} vs {b['digests']}")
if b["timing"]["phases"]["shared_fwd"].get("beside") != "dispatch_fwd":
    sys.exit("FAIL: shared_fwd not beside dispatch_fwd")
if "shared_fwd" in json.load(open(f"{work}/plain.json"))["timing"]["phases"]:
    sys.exit("FAIL: a run without shared experts reports shared_fwd")
PY
"$MOEBENCH" compare "$WORK/plain.json" "$WORK/beside.json" >"$WORK/cmp.txt" 2>&1 ||
  { cat "$WORK/cmp.txt"; fail "compare refused runs that differ only in schedule"; }
grep -q "bitwise identical" "$WORK/cmp.txt" || { cat "$WORK/cmp.txt"; fail "compare digests"; }

rc=0
mpi 2 run --config "$TINY" -q --set overlap=everything >"$WORK/bad.txt" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { cat "$WORK/bad.txt"; fail "bad overlap gave exit $rc, want 2"; }
grep -q "key 'overlap'.*expected one of \"none\", \"dispatch_bwd\"" "$WORK/bad.txt" ||
  { cat "$WORK/bad.txt"; fail "message"; }
[ "$(grep -c "key 'overlap'" "$WORK/bad.txt")" -eq 1 ] || { cat "$WORK/bad.txt"; fail "not printed once"; }

# The CUDA backend's GEMM knobs are refused on the CPU backend, which has one GEMM path: a result
# must not record a knob that was not turned.
rc=0
mpi 2 run --config "$TINY" -q --backend cpu --set gemm.method=grouped_batched >"$WORK/gemm.txt" 2>&1 ||
  rc=$?
[ "$rc" -eq 2 ] || { cat "$WORK/gemm.txt"; fail "gemm.method on cpu gave exit $rc, want 2"; }
grep -q "gemm.method, gemm.method_\*, gemm.streams and gemm.algo" "$WORK/gemm.txt" ||
  { cat "$WORK/gemm.txt"; fail "gemm message"; }
# One GEMM's method needs the others' fixed (gemm.method not auto): refused on every rank.
rc=0
mpi 2 run --config "$TINY" -q --set gemm.method_wgrad_in=lt_multistream >"$WORK/one.txt" 2>&1 ||
  rc=$?
[ "$rc" -eq 2 ] || { cat "$WORK/one.txt"; fail "gemm.method_wgrad_in over auto gave exit $rc, want 2"; }
grep -q "gemm.method_wgrad_in = lt_multistream sets one expert GEMM's method" "$WORK/one.txt" ||
  { cat "$WORK/one.txt"; fail "gemm.method_wgrad_in message"; }
echo "overlap: PASS"
