#!/usr/bin/env bash
# expert_placement balanced moves experts between EP ranks, not what the layer computes: under
# powerlaw routing (hot experts) it evens out the rows per rank that contiguous placement leaves
# uneven, every run passes the check against float64, and with alltoall (each row returned alone,
# summed at its token in k order) out, dx, dw_gate and idx are bitwise contiguous's on EP 2, EP 4
# and EP 2 x FSDP 2. The other dispatchers, the pipeline, graph true, a capacity (whose drops
# rank an expert's rows wherever it lives) and FP8 pass the check with it; moebench dispatch
# places them as run does; dumps name each rank's experts, which the numpy verifier and
# compare_dumps follow.
source "$(dirname "$0")/common.sh"
args=(run --config "$TINY" --backend cpu --set model.experts=16 --set model.topk=4
  --set tokens_per_rank=64 --set routing.mode=powerlaw --steps 3 --warmup 2)
for mesh in "2 2 1" "4 4 1" "4 2 2"; do
  read -r np ep fsdp <<<"$mesh"
  tag="ep$ep-fsdp$fsdp"
  for pl in contiguous balanced; do
    mpi "$np" "${args[@]}" --set mesh.ep="$ep" --set mesh.fsdp="$fsdp" --set expert_placement=$pl \
      --out "$WORK/$pl-$tag.json" >"$WORK/$pl-$tag.txt" 2>&1 ||
      { cat "$WORK/$pl-$tag.txt"; fail "$tag, $pl: the run failed"; }
    grep -qE "^# check: [0-9]+/[0-9]+ PASS" "$WORK/$pl-$tag.txt" ||
      { cat "$WORK/$pl-$tag.txt"; fail "$tag, $pl: no PASS"; }
  done
  grep -qE "^# routing powerlaw .*, experts placed by the first step's rows \(rows per EP rank max/mean [0-9.]+, contiguous [0-9.]+\)" \
    "$WORK/balanced-$tag.txt" || { cat "$WORK/balanced-$tag.txt"; fail "$tag: no placement on the routing line"; }
  a=$(digests "$WORK/contiguous-$tag.json" out dx dw_gate idx)
  b=$(digests "$WORK/balanced-$tag.json" out dx dw_gate idx)
  echo "$tag contiguous: $a"; echo "$tag balanced: $b"
  [ "$a" = "$b" ] || fail "$tag: balanced placement changed out, dx, dw_gate or idx"
  /usr/bin/python3 - "$WORK/contiguous-$tag.json" "$WORK/balanced-$tag.json" <<'PY'
import json, sys
c, b = (json.load(open(f)) for f in sys.argv[1:])
from checks import check
check(c["config"]["expert_placement"] == "contiguous" and b["config"]["expert_placement"] == "balanced",
      "expert_placement not in the result's config")
check(c["routing"]["first_step_rank_load"] is None, "contiguous placement reports a placement")
f = b["routing"]["first_step_rank_load"]
check(f is not None and f["placed_max_over_mean"] < f["contiguous_max_over_mean"],
      f"balanced placement did not even out the first step's rows: {f}")
lc, lb = c["routing"]["rank_load_max_over_mean"], b["routing"]["rank_load_max_over_mean"]
check(lb < lc, f"rows received per rank max/mean: balanced {lb} against contiguous {lc}")
PY
done
for extra in "--set dispatch=alltoall_dedup" "--set dispatch=allgather" \
  "--set dispatch=nvlink --set graph=true" "--set overlap=pipeline --set dispatch=nvlink" \
  "--set capacity_factor=1.0 --set dispatch=alltoall_dedup" \
  "--set precision=fp8_block --set dispatch_dtype=fp8 --set align=16 --set dispatch=alltoall_dedup"; do
  # shellcheck disable=SC2086
  mpi 2 "${args[@]}" --set mesh.ep=2 --set expert_placement=balanced $extra >"$WORK/other.txt" 2>&1 ||
    { cat "$WORK/other.txt"; fail "balanced with $extra: the run failed"; }
  grep -qE "^# check: [0-9]+/[0-9]+ PASS" "$WORK/other.txt" ||
    { cat "$WORK/other.txt"; fail "balanced with $extra: no PASS"; }
done
# moebench dispatch places the experts as run does: its bytes per direction are a one-step run's
# on the same routing, under either placement, and the placements' differ on this routing.
shape=(--config "$TINY" --set model.experts=16 --set model.topk=4 --set routing.mode=powerlaw
  --set mesh.ep=2)
for pl in contiguous balanced; do
  mpi 2 dispatch "${shape[@]}" --set expert_placement=$pl --dispatchers alltoall --tokens 64 \
    --iters 2 --warmup 0 --out "$WORK/bench-$pl.json" >/dev/null
  mpi 2 run "${shape[@]}" --set expert_placement=$pl --set tokens_per_rank=64 --warmup 0 \
    --steps 1 --set check=off --set roofline=false -q --out "$WORK/step-$pl.json" >/dev/null
done
/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
from checks import check
load = lambda n: json.load(open(f"{work}/{n}.json"))
bytes_ = {}
for pl in ("contiguous", "balanced"):
    bench = load(f"bench-{pl}")["results"][0]["directions"]
    step = load(f"step-{pl}")["timing"]["phases"]
    for k in ("dispatch_fwd", "combine_fwd", "combine_bwd", "dispatch_bwd"):
        check(bench[k]["bytes_to_others"] == step["a2a_" + k]["bytes_sent_per_rank"],
              f"{pl} {k}: bench {bench[k]['bytes_to_others']} bytes, step {step['a2a_' + k]['bytes_sent_per_rank']}")
    bytes_[pl] = bench["dispatch_fwd"]["bytes_to_others"]
check(bytes_["contiguous"] != bytes_["balanced"], f"placement did not change the bench's bytes: {bytes_}")
PY
# Dumps name each rank's experts: the numpy verifier recomputes a balanced dump (learned routing,
# EP 2 x FSDP 2), and compare_dumps finds it equal to the contiguous one, expert by expert.
learned=(run --config "$TINY" --backend cpu --set model.experts=16 --set model.topk=4
  --set tokens_per_rank=64 --set mesh.ep=2 --set mesh.fsdp=2 --steps 1 --warmup 0 -q)
for pl in contiguous balanced; do
  mpi 4 "${learned[@]}" --set expert_placement=$pl --dump "$WORK/dump-$pl" >/dev/null
done
/usr/bin/python3 - "$WORK/dump-balanced" <<'PY'
import json, sys
held = [json.load(open(f"{sys.argv[1]}/rank{r}/meta.json"))["experts"] for r in range(2)]
if held == [list(range(8)), list(range(8, 16))]:
    sys.exit(f"FAIL: the balanced dump holds contiguous experts {held}")
PY
/usr/bin/python3 "$SRC/scripts/verify_dump.py" "$WORK/dump-balanced" >"$WORK/verify.txt" ||
  { cat "$WORK/verify.txt"; fail "verify_dump.py on the balanced dump"; }
/usr/bin/python3 "$SRC/scripts/compare_dumps.py" "$WORK/dump-contiguous" "$WORK/dump-balanced" \
  >"$WORK/compare.txt" || { cat "$WORK/compare.txt"; fail "compare_dumps.py: contiguous vs balanced"; }
echo "placement: OK"
