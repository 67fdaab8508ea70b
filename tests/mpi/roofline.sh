#!/usr/bin/env bash
# The roofline calibration on 2 ranks: a measured GEMM rate and all-to-all bandwidth, floors and
# efficiencies in the result JSON and the report; none of the all-to-all's at ep 1; nothing with
# roofline=false; and the calibration leaves the step untouched (digests, memory high-water).
source "$(dirname "$0")/common.sh"
args=(run --config "$TINY" -q --set mesh.ep=2)
mpi 2 "${args[@]}" --out "$WORK/on.json" >"$WORK/on.txt"
mpi 2 "${args[@]}" --set roofline=false --out "$WORK/off.json" >"$WORK/off.txt"
mpi 2 run --config "$TINY" -q --set mesh.ep=1 --out "$WORK/ep1.json" >/dev/null
mpi 2 "${args[@]}" --set precision=fp8_tensor --set fp8_weights=cached --out "$WORK/fp8.json" \
  >"$WORK/fp8.txt"
grep -q "^# roofline: dense GEMM .* TFLOP/s per rank (512x512x512 bf16, slowest rank), in fp8_tensor " \
  "$WORK/fp8.txt" || { cat "$WORK/fp8.txt"; fail "no FP8 GEMM rate on the '# roofline:' line"; }

grep -q "^# roofline: dense GEMM .* TFLOP/s per rank (512x512x512 bf16" "$WORK/on.txt" ||
  { cat "$WORK/on.txt"; fail "no '# roofline:' line with the GEMM rate"; }
grep -q "^# efficiency: step floor .* ms / step median .* ms = .*%" "$WORK/on.txt" ||
  { cat "$WORK/on.txt"; fail "no '# efficiency:' footer"; }
grep -q "^# roofline: off (roofline=false)" "$WORK/off.txt" ||
  { cat "$WORK/off.txt"; fail "roofline=false does not say the calibration is off"; }
grep -q "^# efficiency:" "$WORK/off.txt" && fail "an efficiency footer without a calibration"

/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
on, off, ep1, fp8 = (json.load(open(f"{work}/{n}.json")) for n in ("on", "off", "ep1", "fp8"))
from checks import check

rl = on["roofline"]
check(rl["done"] is True, "roofline.done is not true")
check(rl["gemm_tflops"] > 0, f"gemm_tflops {rl['gemm_tflops']}")
check(rl["a2a_applicable"] is True and rl["ep"] == 2, "a2a not applicable at ep 2")
check(rl["a2a_algbw_gbps"] > 0, f"a2a_algbw_gbps {rl['a2a_algbw_gbps']}")
check(abs(rl["a2a_busbw_gbps"] - rl["a2a_algbw_gbps"] / 2) < 1e-9 * rl["a2a_algbw_gbps"],
      "busbw is not algbw * (n-1)/n")
# An efficiency well above 1 means a unit error; up to a few x is CPU noise between the
# calibration and the step on a shared machine.
check(0 < rl["step_efficiency"] <= 5, f"step_efficiency {rl['step_efficiency']}")
step = on["timing"]["step"]["median"]
check(abs(rl["step_efficiency"] - rl["step_floor_ms"] / step) < 1e-9, "step efficiency != floor/median")
ph = on["timing"]["phases"]
fwd = ph["experts_fwd"]
check(fwd.get("floor_ms", 0) > 0, "experts_fwd has no floor_ms")
check(abs(fwd["efficiency"] - fwd["floor_ms"] / fwd["median"]) < 1e-9, "experts_fwd efficiency")
# The floor is the larger of the compute and memory bounds (which wins depends on this machine's
# load during the calibration), and floor_bound names it.
flops_floor = fwd["flops"] / on["mesh"]["world"] / (rl["gemm_tflops"] * 1e9)
mem_floor = fwd["mem_bytes_per_rank"] / (rl["mem_gbps"] * 1e6)
want = max(flops_floor, mem_floor)
check(abs(fwd["floor_ms"] - want) < 1e-9 * want,
      f"experts_fwd floor {fwd['floor_ms']} is not max(FLOPs/rate {flops_floor}, bytes/bw {mem_floor})")
check(fwd["floor_bound"] == ("compute" if flops_floor >= mem_floor else "memory"),
      f"experts_fwd floor_bound {fwd['floor_bound']}")
a2a = ph["a2a_dispatch_fwd"]
check(abs(a2a["floor_ms"] - a2a["bytes_per_rank"] / (rl["a2a_algbw_gbps"] * 1e6)) < 1e-12,
      "a2a floor is not bytes/algbw")
check(ph["dispatch_fwd"]["floor_ms"] == a2a["floor_ms"], "dispatch_fwd lacks its a2a floor")
check("floor_ms" not in ph["layout"] and "floor_ms" not in ph["grad_sync"], "a floor without a rule")
in_step = sum(p.get("floor_ms", 0) for p in ph.values() if p["in_step"])
check(abs(in_step - rl["step_floor_ms"]) < 1e-9, "step floor is not the sum of the in-step floors")
for n in ("a2a_dispatch_fwd", "a2a_combine_fwd", "a2a_combine_bwd", "a2a_dispatch_bwd"):
    sent = ph[n]["bytes_sent_per_rank"]
    check(0 < sent < ph[n]["bytes_per_rank"], f"{n} bytes_sent_per_rank {sent}")

check(off["roofline"] == {"done": False}, f"roofline=false gave {off['roofline']}")
check(off["config"]["roofline"] is False, "config.roofline is not false")
check(all("floor_ms" not in p and "efficiency" not in p for p in off["timing"]["phases"].values()),
      "floors without a calibration")

rl1 = ep1["roofline"]
check(rl1["done"] and rl1["ep"] == 1 and rl1["a2a_applicable"] is False, "ep 1 calibration")
check(rl1["a2a_algbw_gbps"] == 0 and rl1["gemm_tflops"] > 0, "ep 1 rates")
check("floor_ms" not in ep1["timing"]["phases"]["a2a_dispatch_fwd"], "an a2a floor at ep 1")
check(ep1["timing"]["phases"]["a2a_dispatch_fwd"]["bytes_sent_per_rank"] == 0, "ep 1 sent bytes")

# FP8: the expert phases' compute floors at the FP8 GEMM rate the calibration measured, their
# weights read as one-byte codes (cached), so fewer bytes than bf16's; the bf16 run times none.
check(on["roofline"]["fp8_gemm_tflops"] == 0 and on["roofline"]["fp8_precision"] == "",
      "a bf16 run with an FP8 rate")
rl8 = fp8["roofline"]
check(rl8["fp8_gemm_tflops"] > 0 and rl8["fp8_precision"] == "fp8_tensor",
      f"fp8 rate {rl8['fp8_gemm_tflops']} {rl8['fp8_precision']}")
for n in ("experts_fwd", "experts_bwd"):
    p8, p16 = fp8["timing"]["phases"][n], on["timing"]["phases"][n]
    c = p8["flops"] / fp8["mesh"]["world"] / (rl8["fp8_gemm_tflops"] * 1e9)
    m = p8["mem_bytes_per_rank"] / (rl8["mem_gbps"] * 1e6)
    check(abs(p8["floor_ms"] - max(c, m)) < 1e-9 * max(c, m),
          f"{n} FP8 floor {p8['floor_ms']} is not max(FLOPs/FP8 rate {c}, bytes/bw {m})")
    check(p8["mem_bytes_per_rank"] < p16["mem_bytes_per_rank"],
          f"{n}: FP8's cached weights count no fewer bytes than bf16's")

# The calibration runs before the step and releases what it allocated.
check(on["digests"] == off["digests"], "digests differ with roofline on and off")
check(on["memory"]["high_water_bytes"] == off["memory"]["high_water_bytes"],
      "the calibration's buffers count in the step's memory high-water mark")
print(f"ok: gemm {rl['gemm_tflops']:.4f} TFLOP/s, a2a algbw {rl['a2a_algbw_gbps']:.3f} GB/s, "
      f"step efficiency {100 * rl['step_efficiency']:.1f}%")
PY
echo "roofline: PASS"
