#!/usr/bin/env python3
"""The peer figure for `moebench gemm`: torch._grouped_mm (CUTLASS's sm90 grouped GEMM inside
PyTorch) on the same six expert GEMMs, at the same shapes, timed the same way (CUDA events, median
of --iters calls after two untimed ones). Needs torch with CUDA (the GPU machine has it); prints
the table `moebench gemm` prints.

  scripts/torch_grouped_mm.py configs/bench/qwen3_30b_a3b.json [--ep N] [--tokens T] [--iters N]
  scripts/torch_grouped_mm.py --rows-from gemm.json [--iters N]

A config gives balanced rows, as `moebench gemm --rows balanced` times them; --rows-from takes
the model and the exact rows per expert that a `moebench gemm --out` file timed (with --rows
routed: the step's own skewed rows). --shapes prints the shapes and exits (no torch needed).
"""
import argparse
import json
import os
import statistics
import sys


def balanced_rows(tokens, topk, experts, ep, align):
    # As app/gemm_command.cpp's balanced_expert_rows: T * K rows spread over E / ep experts.
    local = experts // ep
    mine = tokens * topk
    rows = [mine // local + (1 if l < mine % local else 0) for l in range(local)]
    return [(r + align - 1) // align * align for r in rows]


def load_workload(path):
    # As moebench's loader: a "base" file (relative to this one) under this file's keys.
    w = json.load(open(path))
    base = w.pop("base", None)
    if base is None:
        return w
    merged = load_workload(os.path.join(os.path.dirname(path), base))
    for k, v in w.items():
        merged[k] = {**merged.get(k, {}), **v} if isinstance(v, dict) else v
    return merged


def gemm_file_shapes(ap, path):
    # A `moebench gemm --out` file: the workload as it timed it, and its rows per local expert.
    try:
        d = json.load(open(path))
    except (OSError, ValueError) as e:
        ap.error(f"--rows-from {path}: cannot read it as JSON ({e})")
    if not isinstance(d, dict) or d.get("command") != "gemm" or not d.get("rows"):
        ap.error(f"--rows-from {path}: not a `moebench gemm --out` file (no \"command\": \"gemm\" "
                 "with its \"rows\"); write one with moebench gemm ... --out FILE")
    source = d.get("rows_from", "?")
    if d.get("ep_rank") is not None:
        source += f", EP rank {d['ep_rank']}"
    return d["config"], d["rows"], d["ep"], f"{source}, from {os.path.basename(path)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", help="workload JSON (balanced rows)")
    ap.add_argument("--rows-from", metavar="GEMM_JSON",
                    help="a `moebench gemm --out` file: its model and exact rows per expert")
    ap.add_argument("--ep", type=int, default=0, help="default: mesh.ep, or 1")
    ap.add_argument("--tokens", type=int, default=0, help="tokens per rank (default: the config's)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--grad-dtype", choices=["fp32", "bf16"], default="fp32",
                    help="output dtype of the weight gradients")
    ap.add_argument("--shapes", action="store_true", help="print the shapes and exit")
    a = ap.parse_args()
    if (a.config is None) == (a.rows_from is None):
        ap.error("give a workload config or --rows-from GEMM_JSON, not both or neither")
    if a.rows_from and (a.ep or a.tokens):
        ap.error("--ep and --tokens come from the --rows-from file; leave them out")

    if a.rows_from:
        w, rows, ep, source = gemm_file_shapes(ap, a.rows_from)
    else:
        w = load_workload(a.config)
        m = w["model"]
        ep = a.ep or (w.get("mesh", {}).get("ep")
                      if isinstance(w.get("mesh", {}).get("ep"), int) else 1)
        T = a.tokens or w["tokens_per_rank"]
        rows = balanced_rows(T, m["topk"], m["experts"], ep, w.get("align", 1))
        source = "balanced"
    H, F = w["model"]["hidden"], w["model"]["ffn"]
    G, R = len(rows), sum(rows)
    header = (f"# {w.get('name', a.config)} at ep {ep}: {G} local experts x {min(rows)}-{max(rows)} "
              f"rows (mean {R / G:.1f}; {source}), H {H}, F {F}")
    if a.shapes:
        print(header)
        print("rows " + " ".join(str(r) for r in rows))
        return 0
    import torch  # imported late so that --help and --shapes work without torch

    dev = torch.device("cuda")
    bf = torch.bfloat16
    gd = torch.float32 if a.grad_dtype == "fp32" else bf
    offs = torch.tensor(rows, device=dev, dtype=torch.int32).cumsum(0, dtype=torch.int32)

    def rnd(*shape):
        return (torch.rand(*shape, device=dev, dtype=torch.float32) - 0.5).to(bf)

    x, a_, dye, dh = rnd(R, H), rnd(R, F), rnd(R, H), rnd(R, 2 * F)
    w_in, w_out = rnd(G, H, 2 * F), rnd(G, F, H)
    gemms = [
        ("up", R // G, 2 * F, H, lambda: torch._grouped_mm(x, w_in, offs=offs)),
        ("down", R // G, H, F, lambda: torch._grouped_mm(a_, w_out, offs=offs)),
        ("dgrad_a", R // G, F, H, lambda: torch._grouped_mm(dye, w_out.transpose(-2, -1), offs=offs)),
        ("dgrad_x", R // G, H, 2 * F, lambda: torch._grouped_mm(dh, w_in.transpose(-2, -1), offs=offs)),
        ("wgrad_out", F, H, R // G,
         lambda: torch._grouped_mm(a_.t(), dye, offs=offs, out_dtype=gd)),
        ("wgrad_in", H, 2 * F, R // G,
         lambda: torch._grouped_mm(x.t(), dh, offs=offs, out_dtype=gd)),
        ("dense", R, 2 * F, H, lambda: x @ w_in[0]),
    ]
    flops = {"up": 2 * R * 2 * F * H, "down": 2 * R * H * F, "dgrad_a": 2 * R * F * H,
             "dgrad_x": 2 * R * H * 2 * F, "wgrad_out": 2 * R * F * H,
             "wgrad_in": 2 * R * H * 2 * F, "dense": 2 * R * 2 * F * H}
    print(f"{header}, torch {torch.__version__}; median of {a.iters} calls")
    print(f"# {'gemm':10s} {'method':16s} {'M':>7s} {'N':>7s} {'K':>7s} {'median ms':>10s} "
          f"{'TFLOP/s':>9s}")
    def bf16_out(name):
        # torch 2.11's grouped GEMM refuses an fp32 output for bf16 inputs: the weight gradients
        # are then timed with a bf16 output, and the table says so.
        return lambda: torch._grouped_mm(
            (a_ if name == "wgrad_out" else x).t(), dye if name == "wgrad_out" else dh, offs=offs)

    for name, M_, N_, K_, fn in gemms:
        method = "torch_grouped_mm"
        try:
            try:
                fn()
            except RuntimeError:
                if not name.startswith("wgrad") or gd == bf:
                    raise
                fn, method = bf16_out(name), "torch(bf16 out)"
            fn(); fn()
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(a.iters + 1)]
            ev[0].record()
            for i in range(a.iters):
                fn()
                ev[i + 1].record()
            torch.cuda.synchronize()
            ms = statistics.median(ev[i].elapsed_time(ev[i + 1]) for i in range(a.iters))
            print(f"  {name:10s} {method:16s} {M_:7d} {N_:7d} {K_:7d} {ms:10.3f} "
                  f"{flops[name] / ms / 1e9:9.1f}")
        except Exception as e:  # a shape torch refuses is reported, not fatal
            print(f"  {name:10s} torch_grouped_mm refused: {str(e).splitlines()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
