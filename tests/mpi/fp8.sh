#!/usr/bin/env bash
# precision = fp8_tensor | fp8_block on CPU ranks: the check passes against the quantizing
# reference, and the result JSON, report and --dry-run say which precision ran; the distance to
# the unquantized reference is reported per tensor (over the tolerance: a backend that skipped the
# quantization would fail); compare refuses to put FP8 beside bf16 unless told, and takes a result
# from before the key existed as bf16; fp8 with fp32 storage, or on the CUDA backend without
# align 16, is refused naming the key (printed once, every rank exiting non-zero), the GPU
# reference taken. dispatch_dtype fp8 changes only the wire's dispatched rows and w_in's gradient,
# and is refused without fp8_block. check_unquantized false leaves out the unquantized
# distance, the check as it was. fp8_weights cached (on EP 2 x FSDP 2, the weights gathered
# each step) gives per_step's results bit for bit, the report and JSON giving the quantization's
# time, and is refused with bf16 (printed once).
source "$(dirname "$0")/common.sh"
args=(run --config "$TINY" --set mesh.ep=2 --steps 2 --warmup 1 --set model.hidden=256
  --set model.ffn=160 --set tokens_per_rank=256)
mpi 2 "${args[@]}" -q --out "$WORK/bf16.json" >/dev/null
for recipe in fp8_tensor fp8_block; do
  mpi 2 "${args[@]}" --set precision=$recipe --out "$WORK/$recipe.json" >"$WORK/$recipe.txt" 2>&1 ||
    { cat "$WORK/$recipe.txt"; fail "$recipe: the run failed"; }
  grep -qE "^# check: [0-9]+/[0-9]+ PASS" "$WORK/$recipe.txt" || { cat "$WORK/$recipe.txt"; fail "$recipe: no PASS"; }
  grep -q "dtype bf16, precision $recipe" "$WORK/$recipe.txt" || fail "$recipe: the report header does not name it"
  grep -q "vs bf16" "$WORK/$recipe.txt" || fail "$recipe: the report has no unquantized column"
done
# check_unquantized false: the same check without the unquantized reference.
mpi 2 "${args[@]}" --set precision=fp8_tensor --set check_unquantized=false --out "$WORK/no_unq.json" \
  >"$WORK/no_unq.txt" 2>&1 || { cat "$WORK/no_unq.txt"; fail "check_unquantized false: the run failed"; }
grep -qE "^# check: [0-9]+/[0-9]+ PASS" "$WORK/no_unq.txt" || { cat "$WORK/no_unq.txt"; fail "check_unquantized false: no PASS"; }
grep -q "vs bf16" "$WORK/no_unq.txt" && fail "check_unquantized false: the report has an unquantized column"
grep -q "check_unquantized false: the distance to the unquantized reference not measured" "$WORK/no_unq.txt" ||
  { cat "$WORK/no_unq.txt"; fail "check_unquantized false: the report does not say what it skipped"; }

# dispatch_dtype fp8: the same fp8_block step with x packed on the wire.
mpi 2 "${args[@]}" --set precision=fp8_block --set dispatch_dtype=fp8 --out "$WORK/fp8_dispatch.json" \
  >"$WORK/fp8_dispatch.txt" 2>&1 || { cat "$WORK/fp8_dispatch.txt"; fail "fp8 dispatch: the run failed"; }
grep -qE "^# check: [0-9]+/[0-9]+ PASS" "$WORK/fp8_dispatch.txt" || { cat "$WORK/fp8_dispatch.txt"; fail "fp8 dispatch: no PASS"; }
grep -q "precision fp8_block, dispatch_dtype fp8" "$WORK/fp8_dispatch.txt" ||
  fail "fp8 dispatch: the report header does not name it"
grep -q "a dispatched row is 272 bytes (e4m3 codes and 1 x 128 scales) against 512 in bf16, 46.9% fewer" \
  "$WORK/fp8_dispatch.txt" || { cat "$WORK/fp8_dispatch.txt"; fail "fp8 dispatch: the report does not show the bytes saved"; }

# fp8_weights: the CPU backend quantizes inside its GEMMs, so cached changes no bit there either;
# its plumbing (the step skipping the quantization, the time taken alone) is what runs.
fsdp=(--set mesh.ep=2 --set mesh.fsdp=2 --set precision=fp8_block --set model.shared_experts=1
  --set model.shared_ffn=96)
for when in per_step cached; do
  mpi 4 "${args[@]}" "${fsdp[@]}" --set fp8_weights=$when --out "$WORK/weights_$when.json" \
    >"$WORK/weights_$when.txt" 2>&1 || { cat "$WORK/weights_$when.txt"; fail "fp8_weights $when: the run failed"; }
  grep -qE "^# check: [0-9]+/[0-9]+ PASS" "$WORK/weights_$when.txt" ||
    { cat "$WORK/weights_$when.txt"; fail "fp8_weights $when: no PASS"; }
done
grep -q "^# fp8_weights cached: this backend (cpu) quantizes the weights inside each GEMM" "$WORK/weights_cached.txt" ||
  { cat "$WORK/weights_cached.txt"; fail "fp8_weights cached: the report does not say the CPU caches nothing"; }
grep -q "fp8_weights=cached" "$WORK/weights_cached.txt" || fail "fp8_weights cached: not among the report's knobs"
grep -q "fp8_weights" "$WORK/weights_per_step.txt" && fail "fp8_weights per_step: the report mentions the default"
mpi 2 "${args[@]}" --set fp8_weights=cached >"$WORK/bad_weights.txt" 2>&1 &&
  fail "fp8_weights cached with bf16 was accepted"
[ "$(grep -c 'fp8_weights = "cached" with precision = "bf16"' "$WORK/bad_weights.txt")" -eq 1 ] ||
  { cat "$WORK/bad_weights.txt"; fail "the fp8_weights refusal is not printed once"; }

/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
from checks import check
plain = json.load(open(f"{work}/bf16.json"))
check(plain["config"]["precision"] == "bf16", "default precision is not bf16")
check(all("rel_l2_unquantized" not in t for t in plain["correctness"]["checks"][0]["tensors"].values()),
      "a bf16 run reports an unquantized distance")
for recipe in ("fp8_tensor", "fp8_block"):
    r = json.load(open(f"{work}/{recipe}.json"))
    check(r["config"]["precision"] == recipe, f"config does not record {recipe}")
    t = r["correctness"]["checks"][0]["tensors"]
    for name in ("out", "dx", "dw_in", "dw_out"):
        got, u, tol = t[name]["rel_l2"], t[name]["rel_l2_unquantized"], t[name]["tol"]
        check(got < 5e-3, f"{recipe} {name}: rel_l2 {got} far from the rounding floor")
        check(tol < u < 0.2, f"{recipe} {name}: unquantized distance {u} not between tol and 0.2")
    check(r["digests"]["out"] != plain["digests"]["out"], f"{recipe}: out is bf16's")
n, t = json.load(open(f"{work}/no_unq.json")), json.load(open(f"{work}/fp8_tensor.json"))
check(n["config"]["check_unquantized"] is False and t["config"]["check_unquantized"] is True,
      "config does not record check_unquantized")
nt, tt = n["correctness"]["checks"][0]["tensors"], t["correctness"]["checks"][0]["tensors"]
check(all("rel_l2_unquantized" not in v for v in nt.values()), "check_unquantized false: measured it")
check(all(nt[k]["rel_l2"] == tt[k]["rel_l2"] for k in tt), "check_unquantized false: the check changed")
check(n["digests"] == t["digests"], "check_unquantized false: the step changed")
a, b = (json.load(open(f"{work}/{n}.json")) for n in ("fp8_tensor", "fp8_block"))
check(a["digests"]["dw_in"] != b["digests"]["dw_in"], "the two recipes give the same dw_in")
# dispatch_dtype fp8: x reaches the experts as the 1 x 128 quantization fp8_block makes of it
# anyway, so out, dx and dw_out are fp8_block's bit for bit, dw_in (from those rows in bf16) is
# not; the dispatch direction sends packed rows (272 bytes a row here, against 256 floats of the
# CPU backend's storage), the other three directions what they did.
check(plain["config"]["dispatch_dtype"] == "bf16", "default dispatch_dtype is not bf16")
q = json.load(open(f"{work}/fp8_dispatch.json"))
check(q["config"]["dispatch_dtype"] == "fp8", "config does not record dispatch_dtype fp8")
for name in ("out", "dx", "dw_out"):
    check(q["digests"][name] == b["digests"][name], f"fp8 dispatch: {name} is not fp8_block's")
check(q["digests"]["dw_in"] != b["digests"]["dw_in"], "fp8 dispatch: dw_in is fp8_block's")
def sent(r, phase):
    return r["timing"]["phases"][phase]["bytes_sent_per_rank"]
ratio = sent(q, "a2a_dispatch_fwd") / sent(b, "a2a_dispatch_fwd")
check(abs(ratio - 272 / 1024) < 1e-9, f"fp8 dispatch: dispatch bytes ratio {ratio}, not 272/1024")
for phase in ("a2a_combine_fwd", "a2a_combine_bwd", "a2a_dispatch_bwd"):
    check(sent(q, phase) == sent(b, phase), f"fp8 dispatch: {phase} bytes changed")
per_step, cached = (json.load(open(f"{work}/weights_{n}.json")) for n in ("per_step", "cached"))
check(per_step["digests"] == cached["digests"], "fp8_weights cached changed the results")
check(per_step["timing"]["fp8_weight_quantize_ms"] is None, "per_step reports a quantization time")
# The CPU backend quantizes inside each GEMM: nothing kept, so no quantization of its own to time.
check(cached["timing"]["fp8_weight_quantize_ms"] is None, "cached on the CPU reports a quantization time")
check(cached["config"]["fp8_weights"] == "cached", "config does not record fp8_weights")
old = json.load(open(f"{work}/bf16.json")); del old["config"]["precision"]
json.dump(old, open(f"{work}/old.json", "w"))
PY

"$MOEBENCH" compare "$WORK/bf16.json" "$WORK/fp8_block.json" >"$WORK/cmp.txt" 2>&1 &&
  fail "compare took a bf16 and an fp8 run"
grep -q "config.precision" "$WORK/cmp.txt" || { cat "$WORK/cmp.txt"; fail "compare did not name the key"; }
"$MOEBENCH" compare --allow-different-work "$WORK/bf16.json" "$WORK/fp8_block.json" >"$WORK/cmp2.txt" 2>&1 ||
  { cat "$WORK/cmp2.txt"; fail "compare --allow-different-work refused bf16 vs fp8"; }
"$MOEBENCH" compare "$WORK/old.json" "$WORK/bf16.json" >"$WORK/cmp_old.txt" 2>&1 ||
  { cat "$WORK/cmp_old.txt"; fail "a result from before precision does not compare with bf16"; }

mpi 2 "${args[@]}" --set precision=fp8_block --set dtype=fp32 >"$WORK/bad.txt" 2>&1 &&
  fail "fp8 with fp32 storage was accepted"
[ "$(grep -c 'precision = "fp8_block" with dtype = "fp32"' "$WORK/bad.txt")" -eq 1 ] ||
  { cat "$WORK/bad.txt"; fail "the fp32 refusal is not printed once"; }
"$MOEBENCH" run --config "$TINY" --dry-run --backend cuda --set precision=fp8_tensor >"$WORK/cuda.txt" 2>&1 &&
  fail "the CUDA backend took fp8 with align 1"
grep -q "set align=16" "$WORK/cuda.txt" || { cat "$WORK/cuda.txt"; fail "the CUDA align refusal does not name the fix"; }
"$MOEBENCH" run --config "$TINY" --dry-run --backend cuda --set precision=fp8_tensor --set align=16 \
  >"$WORK/cuda16.txt" 2>&1 || { cat "$WORK/cuda16.txt"; fail "a CUDA fp8 plan with align 16 was refused"; }
"$MOEBENCH" run --config "$TINY" --dry-run --backend cuda --set precision=fp8_block --set align=16 \
  --set reference=gpu >"$WORK/gpuref.txt" 2>&1 || { cat "$WORK/gpuref.txt"; fail "a CUDA fp8 plan with the GPU reference was refused"; }
mpi 2 "${args[@]}" --set precision=fp8_tensor --set dispatch_dtype=fp8 >"$WORK/bad_dispatch.txt" 2>&1 &&
  fail "dispatch_dtype fp8 with fp8_tensor was accepted"
[ "$(grep -c 'dispatch_dtype = "fp8" with precision = "fp8_tensor"' "$WORK/bad_dispatch.txt")" -eq 1 ] ||
  { cat "$WORK/bad_dispatch.txt"; fail "the fp8_tensor dispatch refusal is not printed once"; }
"$MOEBENCH" run --config "$TINY" --dry-run --set precision=fp8_block --set dispatch_dtype=fp8 \
  --set mesh.ep=1 >"$WORK/dry_dispatch.txt" 2>&1 || { cat "$WORK/dry_dispatch.txt"; fail "--dry-run with fp8 dispatch failed"; }
grep -q "expert GEMMs fp8_block, dispatched rows fp8" "$WORK/dry_dispatch.txt" ||
  { cat "$WORK/dry_dispatch.txt"; fail "--dry-run does not show the dispatched rows' dtype"; }
"$MOEBENCH" run --config "$TINY" --dry-run --set precision=fp8_block >"$WORK/dry.txt" 2>&1 ||
  { cat "$WORK/dry.txt"; fail "--dry-run with fp8 failed"; }
grep -q "expert GEMMs fp8_block" "$WORK/dry.txt" || { cat "$WORK/dry.txt"; fail "--dry-run does not show the precision"; }
echo "fp8: PASS"
