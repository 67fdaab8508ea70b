#!/usr/bin/env bash
# overlap=pipeline (CPU backend) on ep 2 x fsdp 2: with 1, 2 and 4 chunks every run passes its
# float64 check and its digests are overlap none's, bit for bit, with each dispatcher and both
# gradient dtypes (the CPU GEMM computes each row alone, and the weight gradients take every
# chunk's rows in the unchunked step's order: source rank, then chunk, then token). The report
# marks the dispatcher's phases beside the experts' and gives the lanes: the side lane busy, and
# on the CPU, which runs the lanes in turn, every all-to-all exposed. --dry-run shows the knob and
# the chunks, compare takes the runs side by side, and a bad overlap_chunks is refused on every
# rank with exit status 2.
source "$(dirname "$0")/common.sh"
args=(run --config "$TINY" -q --backend cpu --set mesh.ep=2 --set mesh.fsdp=2 --steps 2
  --warmup 1 --set router.aux_coeff=0.01 --set router.z_coeff=0.001)
digest() {
  /usr/bin/python3 -c "import json, sys
print(json.load(open(sys.argv[1]))['digests'])" "$1"
}
for variant in "alltoall bf16 fp32" "alltoall fp32 fp32" "alltoall_dedup bf16 bf16" \
  "allgather bf16 bf16"; do
  read -r dispatch dtype grads <<<"$variant"
  name="$dispatch-$dtype-$grads"
  d=(--set dispatch="$dispatch" --set dtype="$dtype" --set expert_grad_dtype="$grads")
  mpi 4 "${args[@]}" "${d[@]}" --out "$WORK/none-$name.json" >/dev/null
  for c in 1 2 4; do
    p=(--set overlap=pipeline --set overlap_chunks="$c")
    mpi 4 "${args[@]}" "${d[@]}" "${p[@]}" --out "$WORK/c$c-$name.json" >"$WORK/c$c-$name.txt" ||
      { cat "$WORK/c$c-$name.txt"; fail "$name pipeline $c: the run failed"; }
    grep -qE "^# check: [0-9]+/[0-9]+ PASS" "$WORK/c$c-$name.txt" ||
      { cat "$WORK/c$c-$name.txt"; fail "$name pipeline $c: no PASS"; }
    [ "$(digest "$WORK/c$c-$name.json")" = "$(digest "$WORK/none-$name.json")" ] ||
      fail "$name: overlap_chunks=$c changed results"
  done
done

grep -q "^# overlap: dispatch_fwd runs beside experts_fwd" "$WORK/c4-alltoall-bf16-fp32.txt" ||
  { cat "$WORK/c4-alltoall-bf16-fp32.txt"; fail "no '# overlap:' line"; }
grep -q "^# lanes: main busy .* ms, side busy .* ms; all-to-all .* exposed" "$WORK/c4-alltoall-bf16-fp32.txt" ||
  { cat "$WORK/c4-alltoall-bf16-fp32.txt"; fail "no '# lanes:' line"; }
/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
none, pipe = (json.load(open(f"{work}/{n}.json")) for n in ("none-alltoall-bf16-fp32", "c4-alltoall-bf16-fp32"))
from checks import check
check(pipe["config"]["overlap"] == "pipeline" and pipe["config"]["overlap_chunks"] == 4,
      "the pipeline is not in the result's config")
lanes, plain = pipe["timing"]["lanes"], none["timing"]["lanes"]
check(lanes["side_busy"]["median"] > 0, "the pipeline left the side lane idle")
check(plain["side_busy"]["median"] == 0, "overlap none used the side lane")
for l in (lanes, plain):
    check(l["a2a"]["median"] > 0, "no all-to-all time at ep 2")
    # One CPU thread runs both lanes in turn: nothing hides the communication.
    check(abs(l["a2a_exposed"]["median"] - l["a2a"]["median"]) <= 1e-9 * l["a2a"]["median"],
          f"exposed {l['a2a_exposed']} against {l['a2a']}")
ph = pipe["timing"]["phases"]
for p, beside in (("dispatch_fwd", "experts_fwd"), ("combine_fwd", "experts_fwd"),
                  ("combine_bwd", "experts_bwd"), ("dispatch_bwd", "experts_bwd")):
    check(ph[p].get("beside") == beside, f"{p} not beside {beside}")
PY

"$MOEBENCH" run --config "$TINY" --dry-run --world 4 --backend cpu --set overlap=pipeline \
  --set overlap_chunks=4 >"$WORK/plan.txt" 2>&1 || { cat "$WORK/plan.txt"; fail "dry run"; }
for want in "# knobs: expert_placement=contiguous overlap=pipeline overlap_chunks=4 " "# pipeline: 4 chunks of 8 tokens" \
  "# expert GEMMs per local expert and chunk: [8 x 64]"; do
  grep -qF "$want" "$WORK/plan.txt" || { cat "$WORK/plan.txt"; fail "no '$want' in the plan"; }
done
"$MOEBENCH" compare "$WORK/none-alltoall-bf16-fp32.json" "$WORK/c4-alltoall-bf16-fp32.json" >"$WORK/cmp.txt" 2>&1 ||
  { cat "$WORK/cmp.txt"; fail "compare refused runs that differ only in schedule"; }

for bad in "overlap_chunks=3|overlap_chunks = 3 does not divide tokens_per_rank = 32" \
  "overlap_chunks=128|overlap_chunks = 128 must be between 1 and 64"; do
  set="${bad%%|*}" want="${bad#*|}"
  rc=0
  mpi 2 run --config "$TINY" -q --set overlap=pipeline --set "$set" >"$WORK/bad.txt" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || { cat "$WORK/bad.txt"; fail "$set gave exit $rc, want 2"; }
  [ "$(grep -c -F "$want" "$WORK/bad.txt")" -eq 1 ] || { cat "$WORK/bad.txt"; fail "$set: message"; }
done
rc=0
mpi 2 run --config "$TINY" -q --set overlap_chunks=4 >"$WORK/bad.txt" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "is read only with overlap = \"pipeline\"" "$WORK/bad.txt" ||
  { cat "$WORK/bad.txt"; fail "overlap_chunks without the pipeline"; }
echo "pipeline: PASS"
