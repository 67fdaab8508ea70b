#!/usr/bin/env bash
# Plans that warn: --dry-run names a plan that needs more host memory than this host has, model
# shapes that are not multiples of 8, and fewer than 16 rows per expert; --dry-run --json prints
# the plan as one JSON object (once under mpirun), and --json alone is refused.
source "$(dirname "$0")/../mpi/common.sh"
PY=/usr/bin/python3
plan() { "$MOEBENCH" run --config "$TINY" --dry-run "$@"; }

# 30 M tokens per rank on 64 ranks of this host: hundreds of GiB per rank, beyond any host.
plan --world 64 --set tokens_per_rank=30000000 --set mesh.ep=8 >"$WORK/huge.txt" 2>&1 ||
  { cat "$WORK/huge.txt"; fail "a plan that warns must still exit 0"; }
cat "$WORK/huge.txt"
grep -qE '^# warning: the plan needs about [0-9.]+ GiB of host memory \([0-9.]+ GiB per rank x 64 ranks on this host\) but the host has [0-9.]+ GiB in all \(MemTotal\): lower tokens_per_rank' "$WORK/huge.txt" ||
  fail "no memory warning for a huge tokens_per_rank"
plan --set tokens_per_rank=64 >"$WORK/small.txt" 2>&1 || fail "small plan"
! grep -q '# warning' "$WORK/small.txt" || { cat "$WORK/small.txt"; fail "a plan that fits warned"; }

# Odd shapes: ffn 100 (not a multiple of 8); tiny itself has 32 x 2 / 8 = 8 rows per expert.
plan --set model.ffn=100 --set tokens_per_rank=64 >"$WORK/ffn.txt" 2>&1 || fail "ffn 100 plan"
grep -q '^# warning: model.ffn = 100 is not a multiple of 8' "$WORK/ffn.txt" || { cat "$WORK/ffn.txt"; fail "no warning for ffn 100"; }
[ "$(grep -c '# warning' "$WORK/ffn.txt")" -eq 1 ] || { cat "$WORK/ffn.txt"; fail "ffn 100: other warnings"; }
plan >"$WORK/rows.txt" 2>&1 || fail "tiny plan"
grep -qF '# warning: about 8 rows per expert at balanced routing (tokens_per_rank 32 x mesh.ep 1 x model.topk 2 / model.experts 8), under 16' "$WORK/rows.txt" ||
  { cat "$WORK/rows.txt"; fail "no warning for 8 rows per expert"; }

# --json: one object on stdout, under mpirun printed once, with the mesh and memory figures.
mpi 2 run --config "$TINY" --dry-run --json --set model.ffn=100 >"$WORK/plan.json" 2>"$WORK/plan.err" ||
  { cat "$WORK/plan.json" "$WORK/plan.err"; fail "--dry-run --json failed"; }
"$PY" - "$WORK/plan.json" <<'PYEOF' || { cat "$WORK/plan.json"; fail "--json plan"; }
import json, sys
text = open(sys.argv[1]).read()
plan = json.loads(text)  # one object and nothing else (a second object would not parse)
assert text.count("\n") == 1, "not one line"
assert plan["mesh"] == {"world": 2, "ep": 2, "fsdp": 1, "experts_per_rank": 4}, plan["mesh"]
mem = plan["memory"]
assert mem["step_bytes"] > 0 and mem["check_host_bytes"] > 0 and mem["step_memory"] == "host", mem
assert mem["host_total_bytes"] > 0 and mem["host_ranks"] == 2, mem
assert mem["host_bytes_per_rank"] == mem["step_bytes"] + mem["check_host_bytes"], mem
assert mem["step_parts"]["fp8"] == 0, mem  # bf16 on the CPU backend
assert sum(mem["step_parts"].values()) == mem["step_bytes"], mem
assert mem["step_parts"]["weights"] > 0 and mem["step_parts"]["expert_rows"] > 0, mem
assert plan["config"]["model"]["ffn"] == 100 and plan["backend"] == "cpu", plan
assert plan["expert_gemms"][0] == {"m": 16.0, "k": 64, "n": 200}, plan["expert_gemms"]
assert any("model.ffn = 100" in w for w in plan["warnings"]), plan["warnings"]
assert plan["model_flops_per_step"] > 0 and plan["dispatch"]["name"] == "alltoall", plan
PYEOF
# The CUDA backend's FP8 codes and scratch are part of the step's memory (planned on any build).
"$MOEBENCH" run --config "$TINY" --dry-run --json --backend cuda --set precision=fp8_block \
  --set align=16 >"$WORK/plan8.json" 2>"$WORK/plan8.err" ||
  { cat "$WORK/plan8.json" "$WORK/plan8.err"; fail "--dry-run --json fp8 on cuda failed"; }
"$PY" - "$WORK/plan8.json" <<'PYEOF' || { cat "$WORK/plan8.json"; fail "--json fp8 plan"; }
import json, sys
mem = json.load(open(sys.argv[1]))["memory"]
codes = 2 * 8 * 3 * 64 * 32  # the 8 experts' weights both ways round, one byte each
assert mem["step_parts"]["fp8"] >= codes and mem["step_bytes"] > mem["step_parts"]["fp8"], mem
assert sum(mem["step_parts"].values()) == mem["step_bytes"], mem
PYEOF
rc=0
"$MOEBENCH" run --config "$TINY" --json >"$WORK/bad.txt" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q -- "--json prints the plan of --dry-run" "$WORK/bad.txt" || { cat "$WORK/bad.txt"; fail "--json without --dry-run: exit $rc"; }
echo "plan: PASS"
