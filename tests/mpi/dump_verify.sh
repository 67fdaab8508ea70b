#!/usr/bin/env bash
# A dump of a 4-rank ep=2 x fsdp=2 step is reproduced by the independent numpy verifier, for two
# router variants and with shared experts; a corrupted dump is rejected.
source "$(dirname "$0")/common.sh"
PY=/usr/bin/python3
"$PY" -c "import numpy" || fail "numpy for /usr/bin/python3 is missing (apt-get install python3-numpy)"
mpi 4 run --config "$TINY" -q --set mesh.ep=2 --set mesh.fsdp=2 --dump "$WORK/d1" >/dev/null
"$PY" "$SRC/scripts/verify_dump.py" "$WORK/d1"
mpi 4 run --config "$TINY" -q --set mesh.ep=2 --set mesh.fsdp=2 --set router.score=sigmoid \
  --set router.groups=4 --set router.group_topk=2 --set router.normalize_topk=true \
  --set router.scaling=2.5 --set router.expert_bias=true --set router.aux_coeff=0.01 \
  --set router.z_coeff=0.001 --dump "$WORK/d2" >/dev/null
"$PY" "$SRC/scripts/verify_dump.py" "$WORK/d2"
# align pads with zero rows and changes no result: its dump verifies. A forced routing mode is
# outside MATH.md: the verifier refuses it (exit 3) instead of reporting a mismatch.
mpi 4 run --config "$TINY" -q --set mesh.ep=4 --set align=16 --dump "$WORK/d4" >/dev/null
"$PY" "$SRC/scripts/verify_dump.py" "$WORK/d4" >/dev/null || fail "align=16 dump does not verify"
mpi 4 run --config "$TINY" -q --set mesh.ep=4 --set routing.mode=uniform --dump "$WORK/d5" >/dev/null
rc=0
"$PY" "$SRC/scripts/verify_dump.py" "$WORK/d5" 2>/dev/null || rc=$?
[ "$rc" = 3 ] || fail "a routing.mode=uniform dump should be refused with exit 3, got $rc"
# Two backends (here: two runs of one) agree on the same workload and seed; another seed differs.
mpi 4 run --config "$TINY" -q --set mesh.ep=2 --set mesh.fsdp=2 --dump "$WORK/d1b" >/dev/null
"$PY" "$SRC/scripts/compare_dumps.py" "$WORK/d1" "$WORK/d1b" >/dev/null || fail "same run disagrees"
mpi 4 run --config "$TINY" -q --set mesh.ep=2 --set mesh.fsdp=2 --set seed=9 --dump "$WORK/d3" >/dev/null
if "$PY" "$SRC/scripts/compare_dumps.py" "$WORK/d1" "$WORK/d3" >/dev/null; then
  fail "dumps of different seeds agree"
fi
# compare_dumps compares two dumps of a routing control too (the verifier cannot): they agree,
# and a wrong loss (out, aux and z untouched) is caught by the loss bound.
for d in d6 d6b; do
  mpi 4 run --config "$TINY" -q --set mesh.ep=4 --set routing.mode=hot --set capacity_factor=1.0 \
    --set router.aux_coeff=0.01 --dump "$WORK/$d" >/dev/null
done
"$PY" "$SRC/scripts/compare_dumps.py" "$WORK/d6" "$WORK/d6b" >/dev/null || fail "controlled dumps disagree"
"$PY" - "$WORK/d6b" <<'PYEOF'
import json, os, sys
for r in sorted(os.listdir(sys.argv[1])):
    p = os.path.join(sys.argv[1], r, "meta.json")
    m = json.load(open(p)); m["loss"] += 1e-3 * (abs(m["loss"]) + 1); json.dump(m, open(p, "w"))
PYEOF
if "$PY" "$SRC/scripts/compare_dumps.py" "$WORK/d6" "$WORK/d6b" >/dev/null; then
  fail "a loss off by 1e-3 relative passed compare_dumps"
fi
# Shared experts: the dump holds each rank's full copy of their weights and their summed
# gradients, with the shapes of the layer ([S, H, 2F_sh], [S, F_sh, H]); the verifier recomputes
# them, compare_dumps compares them, and a wrong shared gradient fails the verifier.
SH=(--set mesh.ep=2 --set mesh.fsdp=2 --set model.shared_experts=2 --set model.shared_ffn=24)
mpi 4 run --config "$TINY" -q "${SH[@]}" --dump "$WORK/d7" >/dev/null
mpi 4 run --config "$TINY" -q "${SH[@]}" --set overlap=dispatch_bwd --dump "$WORK/d7b" >/dev/null
"$PY" - "$WORK/d7" <<'PYEOF'
import json, os, sys, numpy as np
for r in range(4):
    d = os.path.join(sys.argv[1], f"rank{r}")
    meta = json.load(open(os.path.join(d, "meta.json")))
    assert (meta["shared_experts"], meta["shared_ffn"]) == (2, 24), meta
    for name, shape in (("w_sh_in", (2, 64, 48)), ("w_sh_out", (2, 24, 64)),
                        ("dw_sh_in", (2, 64, 48)), ("dw_sh_out", (2, 24, 64))):
        a = np.load(os.path.join(d, name + ".npy"))
        assert a.shape == shape and a.dtype == np.float32, (r, name, a.shape, a.dtype)
        assert np.abs(a).max() > 0, (r, name, "all zero")
PYEOF
"$PY" "$SRC/scripts/verify_dump.py" "$WORK/d7" >"$WORK/v7.txt" || { cat "$WORK/v7.txt"; fail "shared dump"; }
grep -q "^dw_sh_in .*PASS" "$WORK/v7.txt" || { cat "$WORK/v7.txt"; fail "no dw_sh_in row"; }
"$PY" "$SRC/scripts/compare_dumps.py" "$WORK/d7" "$WORK/d7b" >"$WORK/c7.txt" ||
  { cat "$WORK/c7.txt"; fail "shared dumps disagree"; }
grep -q "^input w_sh_in .*bitwise equal" "$WORK/c7.txt" || { cat "$WORK/c7.txt"; fail "w_sh_in"; }
"$PY" - "$WORK/d7/rank2/dw_sh_in.npy" <<'PYEOF'
import sys, numpy as np
a = np.load(sys.argv[1]); a.flat[3] += 10.0 * (abs(a).max() + 1); np.save(sys.argv[1], a)
PYEOF
if "$PY" "$SRC/scripts/verify_dump.py" "$WORK/d7" >/dev/null; then fail "corrupted dw_sh_in passed"; fi
# Corrupt one gradient value: the verifier must fail.
"$PY" - "$WORK/d2/rank1/dw_out.npy" <<'PYEOF'
import sys, numpy as np
a = np.load(sys.argv[1]); a.flat[0] += 10.0 * (abs(a).max() + 1); np.save(sys.argv[1], a)
PYEOF
if "$PY" "$SRC/scripts/verify_dump.py" "$WORK/d2" >/dev/null; then fail "corrupted dump passed"; fi
echo "dump_verify: PASS"
