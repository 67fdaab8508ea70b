#!/usr/bin/env bash
# expert_grad_dtype=bf16 on ep 2 x fsdp 2: the check passes; the dumped expert gradients (after
# the FSDP reduce-scatter) are bf16 values; the forward and dx are bitwise those of fp32 gradients
# while dw_in and dw_out are not; the report counts the bytes the CPU backend moves (floats
# either way: half of them is the CUDA backend's, checked by gpu_check.sh); compare refuses to
# put the two side by side, yet takes a result from before the key existed as fp32.
source "$(dirname "$0")/common.sh"
args=(run --config "$TINY" -q --set mesh.ep=2 --set mesh.fsdp=2 --steps 2 --warmup 1)
mpi 4 "${args[@]}" --out "$WORK/fp32.json" >/dev/null
mpi 4 "${args[@]}" --set expert_grad_dtype=bf16 --out "$WORK/bf16.json" --dump "$WORK/dump" \
  >"$WORK/bf16.txt" || { cat "$WORK/bf16.txt"; fail "bf16 gradients: the run failed"; }
grep -qE "^# check: [0-9]+/[0-9]+ PASS" "$WORK/bf16.txt" || { cat "$WORK/bf16.txt"; fail "bf16 gradients: no PASS"; }

/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
import numpy as np
work = sys.argv[1]
from checks import check
a, b = (json.load(open(f"{work}/{n}.json")) for n in ("fp32", "bf16"))
check(a["config"]["expert_grad_dtype"] == "fp32", "default expert_grad_dtype is not fp32")
check(b["config"]["expert_grad_dtype"] == "bf16", "config does not record bf16 gradients")
for k in ("out", "dx", "dw_gate", "idx"):
    check(a["digests"][k] == b["digests"][k], f"{k} changed with the expert gradient dtype")
for k in ("dw_in", "dw_out"):
    check(a["digests"][k] != b["digests"][k], f"{k} is the same with bf16 gradients")
pa, pb = a["timing"]["phases"], b["timing"]["phases"]
for ph, key in (("grad_sync", "bytes_per_rank"), ("experts_bwd", "mem_bytes_per_rank")):
    check(pb[ph][key] == pa[ph][key] > 0, f"{ph} {key}: the CPU backend moves floats either way")
bits = 0
for r in range(4):
    for n in ("dw_in", "dw_out"):
        g = np.load(f"{work}/dump/rank{r}/{n}.npy").astype(np.float32)
        check(np.abs(g).max() > 0, f"rank {r} {n} is all zeros")
        bits |= int(np.bitwise_or.reduce(g.view(np.uint32).ravel() & 0xFFFF))
check(bits == 0, "dumped expert gradients are not bf16 values (low 16 bits set)")
PY

mpi 4 "${args[@]}" --set expert_grad_dtype=bf16 --set dtype=fp32 >"$WORK/bad.txt" 2>&1 &&
  fail "bf16 gradients of fp32 weights were accepted"
grep -q "expert_grad_dtype" "$WORK/bad.txt" || { cat "$WORK/bad.txt"; fail "error does not name the key"; }

"$MOEBENCH" compare "$WORK/fp32.json" "$WORK/bf16.json" >"$WORK/cmp.txt" 2>&1 &&
  fail "compare took runs with different gradient dtypes"
grep -q "config.expert_grad_dtype" "$WORK/cmp.txt" || { cat "$WORK/cmp.txt"; fail "compare did not name the key"; }
/usr/bin/python3 -c "
import json, sys
r = json.load(open(sys.argv[1])); del r['config']['expert_grad_dtype']
json.dump(r, open(sys.argv[2], 'w'))" "$WORK/fp32.json" "$WORK/old.json"
"$MOEBENCH" compare "$WORK/old.json" "$WORK/fp32.json" >"$WORK/cmp_old.txt" 2>&1 ||
  { cat "$WORK/cmp_old.txt"; fail "a result from before expert_grad_dtype does not compare with fp32"; }
echo "expert_grad_dtype: PASS"
