#!/usr/bin/env bash
# The all-to-alls' wait for slower ranks: with every token routed to the one expert of one of two
# EP ranks, that rank does all the expert work and the other waits for it inside the next
# collective (a2a_combine_fwd, a2a_dispatch_bwd). The lanes report the all-to-all time of the
# slowest rank and of the rank that spent least in them; here most of the first must show as
# waiting, in the JSON (lanes.a2a_least_rank, lanes.a2a_wait_share) and on the "# lanes:" line.
# Each phase's rank spread (the slowest rank's ms less the fastest's) puts the busy rank's expert
# work on the "# ranks:" line, and one rank prints none. With 9 timed steps the result also gives
# their drift (the medians of their thirds).
source "$(dirname "$0")/common.sh"
mpi 2 run --config "$SRC/configs/quickstart.json" --backend cpu --set mesh.ep=2 --set mesh.fsdp=1 \
  --set model.experts=2 --set model.topk=1 --set routing.mode=hot --set routing.hot_experts=1 \
  --set routing.hot_fraction=1 --set check=off --steps 9 --warmup 1 --out "$WORK/hot.json" \
  >"$WORK/hot.txt" 2>&1 || { cat "$WORK/hot.txt"; fail "the one-hot-expert run failed"; }
grep -qE "^# lanes: .*all-to-all [0-9.]+ ms, .*; [0-9.]+ ms on the rank with the least \([0-9.]+% of it waits for slower ranks\)" \
  "$WORK/hot.txt" || { cat "$WORK/hot.txt"; fail "no least rank on the '# lanes:' line"; }
grep -qE "^# ranks: the slowest rank's ms less the fastest's, median over steps: .*experts_bwd [0-9.]+" \
  "$WORK/hot.txt" || { cat "$WORK/hot.txt"; fail "experts_bwd not on the '# ranks:' line"; }
mpi 1 run --config "$SRC/configs/quickstart.json" --backend cpu --set check=off --steps 2 \
  --warmup 1 >"$WORK/one.txt" 2>&1 || { cat "$WORK/one.txt"; fail "the one-rank run failed"; }
! grep -q "^# ranks:" "$WORK/one.txt" || fail "a '# ranks:' line from one rank"
/usr/bin/python3 - "$WORK/hot.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
lanes, ph = r["timing"]["lanes"], r["timing"]["phases"]
from checks import check
a2a, least = lanes["a2a"]["median"], lanes["a2a_least_rank"]["median"]
check(0 < least < a2a, f"least rank's all-to-all {least} ms against the slowest's {a2a} ms")
# The idle rank waits about as long as the busy rank's expert phases.
check(lanes["a2a_wait_share"] > 0.5, f"a2a_wait_share {lanes['a2a_wait_share']} with one busy rank")
check(abs(lanes["a2a_wait_share"] - (1 - least / a2a)) < 1e-9, "a2a_wait_share is not 1 - least / a2a")
dr = r["timing"]["step_drift"]
check(dr is not None and len(dr["thirds_ms"]) == 3, f"step_drift {dr} from 9 timed steps")
check(abs(dr["spread"] - (max(dr["thirds_ms"]) / min(dr["thirds_ms"]) - 1)) < 1e-9, f"step_drift {dr}")
for n, p in ph.items():
    sp = p["rank_spread"]
    check(0 <= sp["min"] <= sp["median"] <= sp["max"] <= p["max"], f"{n} rank_spread {sp}")
# The idle rank has no expert work: the spread is about the busy rank's whole time.
check(ph["experts_bwd"]["rank_spread"]["median"] > 0.5 * ph["experts_bwd"]["median"],
      f"experts_bwd rank_spread {ph['experts_bwd']['rank_spread']} against {ph['experts_bwd']['median']} ms")
check(a2a - least > 0.5 * (ph["experts_fwd"]["median"] + ph["experts_bwd"]["median"]),
      f"wait {a2a - least} ms against the experts' {ph['experts_fwd']['median']} + {ph['experts_bwd']['median']} ms")
PY
