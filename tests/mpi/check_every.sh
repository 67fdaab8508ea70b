#!/usr/bin/env bash
# check = every on 2 CPU ranks: the report's summary lines over the checked steps agree with the
# result JSON's per-step checks -- each tensor's worst rel_l2 and its step (the table shows only
# the first step), and with fp8_tensor the per-tensor scales reported, summed over the steps.
source "$(dirname "$0")/common.sh"
args=(run --config "$TINY" --set mesh.ep=2 --steps 3 --warmup 1 --set check=every
  --set model.hidden=256 --set model.ffn=160 --set tokens_per_rank=64)
for precision in bf16 fp8_tensor; do
  mpi 2 "${args[@]}" --set precision=$precision --out "$WORK/$precision.json" >"$WORK/$precision.txt" 2>&1 ||
    { cat "$WORK/$precision.txt"; fail "$precision: the run failed"; }
  grep -q "^# checked 3 steps, 0 failed" "$WORK/$precision.txt" ||
    { cat "$WORK/$precision.txt"; fail "$precision: no '# checked 3 steps' line"; }
  /usr/bin/python3 - "$WORK/$precision" "$precision" <<'PY'
import json, re, sys
from checks import check
base, precision = sys.argv[1], sys.argv[2]
r = json.load(open(base + ".json"))
text = open(base + ".txt").read()
checks = r["correctness"]["checks"]
check(len(checks) == 3, f"{precision}: {len(checks)} checks in the JSON, not 3")
line = re.search(r"^# worst rel_l2 of the 3 checked steps: (.*)$", text, re.M)
check(line is not None, f"{precision}: no worst-of-steps line")
got = {m[0]: (float(m[1]), int(m[2])) for m in re.findall(r"(\w+) (\S+) \(step (\d+)\)", line[1])}
check(set(got) == set(checks[0]["tensors"]), f"{precision}: the line's tensors {sorted(got)}")
for name, (value, step) in got.items():
    worst = max(checks, key=lambda c: c["tensors"][name]["rel_l2"])
    check(f"{worst['tensors'][name]['rel_l2']:.3e}" == f"{value:.3e}" and
          worst["tensors"][name]["rel_l2"] == next(c for c in checks if c["step"] == step)["tensors"][name]["rel_l2"],
          f"{precision} {name}: the line says {value} at step {step}, the JSON's worst differs")
steps = {c["step"] for c in checks}
check(len(steps) == 3, f"{precision}: checked steps {steps}")
scales = re.search(r"^# fp8 scales: (\d+) of the (\d+) per-tensor scales the backend reported over "
                   r"the 3 checked steps taken", text, re.M)
if precision == "fp8_tensor":
    check(scales is not None, "fp8_tensor: no fp8 scales line over the checked steps")
    check(int(scales[2]) == sum(c["fp8_scales"]["reported"] for c in checks) and
          int(scales[1]) == sum(c["fp8_scales"]["adopted"] for c in checks),
          f"fp8_tensor: the line's {scales[1]} of {scales[2]} are not the steps' sums")
    check(int(scales[2]) == 3 * checks[0]["fp8_scales"]["reported"] > 0, "fp8_tensor: scales per step")
else:
    check(scales is None and "# fp8 scales" not in text, "bf16: an fp8 scales line")
PY
done
echo "check_every: PASS"
