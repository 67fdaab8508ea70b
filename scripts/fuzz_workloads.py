#!/usr/bin/python3
"""Random workloads, run to see that nothing crashes, hangs, fails its check or writes a partial
result. Each run draws a small shape, a router, a routing mode, a mesh of 1 to --max-np ranks and
the step's options (precision, dispatcher, capacity, align, overlap, shared experts, graph, ...)
and runs `mpirun -np NP moebench run` on the CPU backend (--backend cuda with one GPU a rank).
A run must either pass its check and write its result, or be refused (exit 2) with an `error:`
line (printed beside it) and no result file; anything else (a failed check, another exit status,
a crash, a timeout, a result file beside a refusal) is a failure, printed with its command line.
Exit 0 when every run was one of the two, 1 otherwise.

Tokens stay at 8 a rank or more: with fewer, the router gradient's check can fail on a correct
backend where a token's dp = <dout, y> cancels; and an aux loss is not drawn beside top-1 at a
constant weight over balanced routing, where the gate's gradient is zero (docs/correctness.md).
"""
import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile


def draw(rng, max_np):
    """One workload: (ranks, {key: value}) for --set."""
    np_ = rng.randint(1, max_np)
    E = rng.choice([4, 6, 8, 12, 16])
    K = rng.choice([1, 2, 3, 4, min(E, 6)])
    H = rng.choice([16, 24, 40, 64, 136])
    s = {"model.hidden": H, "model.ffn": rng.choice([8, 24, 32, 48, 72]), "model.experts": E,
         "model.topk": K, "tokens_per_rank": rng.choice([8, 17, 32]),
         "seed": rng.randint(1, 10**6)}
    maybe = lambda prob: rng.random() < prob  # noqa: E731
    if maybe(0.5):
        s["router.score"] = rng.choice(["softmax", "sigmoid"])
    if maybe(0.3):
        s["router.softmax_after_topk"] = rng.choice(["true", "false"])
    if maybe(0.4):
        s["router.normalize_topk"] = rng.choice(["true", "false"])
    if maybe(0.3):
        s["router.scaling"] = rng.choice([0.5, 1.0, 2.5])
    if maybe(0.3):
        groups = rng.choice([g for g in (1, 2, 4) if E % g == 0])
        s["router.groups"] = groups
        s["router.group_topk"] = rng.choice([g for g in (1, 2, groups) if g <= groups and K % g == 0])
    if maybe(0.3):
        s["router.expert_bias"] = rng.choice(["true", "false"])
    if maybe(0.3):
        s["router.aux_coeff"] = rng.choice([0.0, 0.01, 1.0])
    if maybe(0.3):
        s["router.z_coeff"] = rng.choice([0.0, 0.001])
    if maybe(0.4):
        mode = rng.choice(["uniform", "balanced", "powerlaw", "hot"])
        s["routing.mode"] = mode
        if mode == "powerlaw":
            s["routing.skew"] = rng.choice([0.0, 0.5, 3.0])
        if mode == "hot":
            s["routing.hot_fraction"] = rng.choice([0.0, 0.5, 1.0])
            s["routing.hot_experts"] = rng.choice([1, 2, E])
    s["mesh.ep"] = rng.choice([d for d in range(1, np_ + 1) if np_ % d == 0 and E % d == 0])
    s["mesh.fsdp"] = np_ // s["mesh.ep"]
    if maybe(0.1):
        s["dtype"] = "fp32"
        s["expert_grad_dtype"] = "fp32"
    elif maybe(0.3):
        s["expert_grad_dtype"] = rng.choice(["bf16", "fp32"])
    if s.get("dtype") != "fp32" and maybe(0.3):
        s["precision"] = rng.choice(["fp8_tensor", "fp8_block"])
        if s["precision"] == "fp8_block" and H % 16 == 0 and maybe(0.4):
            s["dispatch_dtype"] = "fp8"
        if maybe(0.4):
            s["fp8_weights"] = rng.choice(["per_step", "cached"])
    if maybe(0.4):
        s["dispatch"] = rng.choice(["alltoall", "allgather", "alltoall_dedup", "nvlink"])
    if maybe(0.2):
        s["expert_placement"] = rng.choice(["contiguous", "balanced"])
    if maybe(0.3):
        s["capacity_factor"] = rng.choice([0.5, 1.0, 1.25, 4.0])
        s["drop_policy"] = rng.choice(["probability", "position"])
    if maybe(0.3):
        s["align"] = rng.choice([1, 16, 128])
    if maybe(0.3):
        s["overlap"] = rng.choice(["none", "dispatch_bwd", "pipeline"])
        if s["overlap"] == "pipeline":
            T = s["tokens_per_rank"]
            s["overlap_chunks"] = rng.choice([c for c in (1, 2, 3, T) if T % c == 0])
    if maybe(0.2):
        s["model.shared_experts"] = rng.choice([1, 2])
        s["model.shared_ffn"] = rng.choice([8, 40])
    if maybe(0.15):  # at EP > 1 only allgather and nvlink take it; the others are refused
        s["graph"] = "true"
    if maybe(0.1):
        s["check"] = "every"
    # Top-1 at a constant weight with an aux loss over balanced routing: dw_gate is zero in exact
    # arithmetic and its relative check compares rounding noise (docs/correctness.md). No rng
    # draw here, so that a seed's other workloads stay as they were.
    constant = "true" in (s.get("router.normalize_topk"), s.get("router.softmax_after_topk"))
    if K == 1 and constant and s.get("routing.mode") == "balanced" and not s.get("router.z_coeff"):
        s["router.aux_coeff"] = 0.0
    return np_, s


def main():
    ap = argparse.ArgumentParser(prog="scripts/fuzz_workloads.py",
                                 description=__doc__.split("\n\n")[0],
                                 epilog="Example: scripts/fuzz_workloads.py --moebench build/moebench "
                                        "--runs 100 --seed 7")
    ap.add_argument("--moebench", required=True, metavar="BIN", help="the moebench binary")
    ap.add_argument("--runs", type=int, default=50, help="workloads to draw (default 50)")
    ap.add_argument("--seed", type=int, default=1, help="the draws' seed (default 1)")
    ap.add_argument("--max-np", type=int, default=4, help="most ranks a run takes (default 4)")
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu", help="default cpu")
    ap.add_argument("--timeout", type=float, default=240,
                    help="seconds a run may take before it counts as hung (default 240)")
    ap.add_argument("--config", metavar="JSON",
                    help="the base workload (default configs/tiny.json of this checkout)")
    a = ap.parse_args()
    if a.runs < 1 or a.max_np < 1 or a.timeout <= 0:
        ap.error("--runs and --max-np take a positive count, --timeout positive seconds")
    if not os.access(a.moebench, os.X_OK):
        ap.error(f"--moebench {a.moebench}: not an executable")
    config = a.config or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs",
                                      "tiny.json")
    rng = random.Random(a.seed)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    work = tempfile.mkdtemp(prefix="moebench-fuzz-")
    counts = {"passed": 0, "refused": 0, "failed": 0}
    try:
        for i in range(a.runs):
            np_, keys = draw(rng, a.max_np)
            out = os.path.join(work, f"r{i}.json")
            # graph: true captures in the last warm-up step, after one run as issued.
            warmup = "2" if keys.get("graph") == "true" else "1"
            cmd = ["mpirun", "--oversubscribe", "-np", str(np_), a.moebench, "run", "--backend",
                   a.backend, "--config", config, "--steps", "2", "--warmup", warmup, "-q", "--out",
                   out, "--timeout-s", str(min(a.timeout / 2, 120))]
            for k, v in keys.items():
                cmd += ["--set", f"{k}={v}"]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env,
                                   stdin=subprocess.DEVNULL)
                rc, text = p.returncode, p.stdout + p.stderr
            except subprocess.TimeoutExpired:
                rc, text = "timeout", ""
            wrote = os.path.exists(out)
            passed = re.search(r"^# check: (\d+)/\1 PASS", text, re.M) is not None
            if rc == 0 and passed and wrote:
                outcome = "passed"
            elif rc == 2 and re.search(r"\] error: ", text) and not wrote:
                outcome = "refused"
            else:
                outcome = "failed"
            counts[outcome] += 1
            # A refusal's reason, so that a reader can tell a fair refusal from a wrong one.
            why = re.search(r"\] error: (.*)", text) if outcome == "refused" else None
            print(f"{i} np {np_}: {outcome}" + (f": {why.group(1)[:300]}" if why else ""),
                  flush=True)
            if outcome == "failed":
                print(f"  exit {rc}, result file {'written' if wrote else 'absent'}: "
                      f"{' '.join(cmd)}\n{text[-3000:]}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{a.runs} workloads: {counts['passed']} passed their check, {counts['refused']} refused "
          f"with a message, {counts['failed']} failed")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
