#!/usr/bin/python3
"""Do two backends compute the same step? Compares two moebench dumps of the same workload and seed
(e.g. --backend cpu and --backend cuda): the inputs must be bitwise equal, the routing equal per
token (near ties excepted, as MATH.md allows), and every tensor within MATH.md's tolerance of the
other (rel_l2 over the whole world). Exit 0 when all agree, 1 when something differs, 2 on a
malformed dump.

    compare_dumps.py DIR_A DIR_B
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # importing verify_dump leaves no __pycache__ in the checkout
from verify_dump import Malformed, by_expert, load_dump, route  # noqa: E402  (the same loader and router)

NEAR_TIE = 1e-3
INPUTS = ("x", "dout", "w_gate", "w_in", "w_out")
EXPERT_TENSORS = ("w_in", "w_out", "dw_in", "dw_out")  # compared in expert order (expert_placement)
TENSORS = ("out", "dx", "p", "dw_gate", "dw_in", "dw_out")
SHARED_INPUTS, SHARED_TENSORS = ("w_sh_in", "w_sh_out"), ("dw_sh_in", "dw_sh_out")  # with shared experts




def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    den = np.linalg.norm(b)
    return np.linalg.norm(a - b) / den if den > 0 else np.linalg.norm(a - b)


def compare(dir_a, dir_b, log=print):
    ca, ra = load_dump(dir_a, allow_controls=True)
    cb, rb = load_dump(dir_b, allow_controls=True)
    if ca != cb:
        diff = sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))
        raise Malformed(f"the dumps are of different workloads or meshes: {diff}")
    ok = True
    shared = ca["S"] > 0
    ep, E = ca["ep"], ca["E"]

    def whole(ranks, name):
        """Every rank's part of a tensor; an expert tensor in expert order, wherever each expert
        was placed, once per FSDP group (each holds every expert)."""
        if name in EXPERT_TENSORS:
            return np.concatenate([by_expert(ranks[f * ep:(f + 1) * ep], name, ep, E).ravel()
                                   for f in range(len(ranks) // ep)])
        return np.concatenate([r[name].ravel() for r in ranks])

    for name in INPUTS + (("expert_bias",) if ca["expert_bias"] else ()) + (SHARED_INPUTS if shared else ()):
        same = np.array_equal(whole(ra, name), whole(rb, name)) if name in EXPERT_TENSORS else \
            all(np.array_equal(x[name], y[name]) for x, y in zip(ra, rb))
        log(f"{'input ' + name:<18} {'bitwise equal' if same else 'DIFFERENT':>26}  "
            f"{'PASS' if same else 'FAIL'}")
        ok &= same

    # Routing per token: the same expert sets, or a near tie in the float64 scores. A forced
    # routing.mode draws the experts from the seed: no ties, the sets must be equal.
    ia = np.sort(np.concatenate([r["idx"] for r in ra]), axis=1)
    ib = np.sort(np.concatenate([r["idx"] for r in rb]), axis=1)
    differ = np.any(ia != ib, axis=1)
    if ra[0]["meta"].get("routing", {}).get("mode", "learned") == "learned":
        X = np.concatenate([r["x"] for r in ra]).astype(np.float64)
        logits = X @ ra[0]["w_gate"].astype(np.float64)
        bias = ra[0]["expert_bias"].astype(np.float64) if ca["expert_bias"] else None
        rt = route(logits, bias, ca)
        tie = (rt["expert_gap"] <= NEAR_TIE) | (rt["group_gap"] <= NEAR_TIE)
    else:
        tie = np.zeros_like(differ)
    mismatches, ties = int(np.sum(differ & ~tie)), int(np.sum(differ & tie))
    log(f"{'routing':<18} {f'{mismatches} differ, {ties} near ties':>26}  "
        f"{'PASS' if mismatches == 0 else 'FAIL'}")
    ok &= mismatches == 0

    # p is compared in expert-id order so that the order inside the top-k does not matter.
    def p_sorted(ranks):
        idx = np.concatenate([r["idx"] for r in ranks])
        p = np.concatenate([r["p"] for r in ranks])
        return np.take_along_axis(p, np.argsort(idx, axis=1, kind="stable"), axis=1)

    for name in TENSORS + (SHARED_TENSORS if shared else ()):
        if name == "p":
            a, b = p_sorted(ra)[~differ], p_sorted(rb)[~differ]
        else:
            a, b = whole(ra, name), whole(rb, name)
        err, tol = rel_l2(a, b), ra[0]["meta"]["tolerances"][name]
        finite = bool(np.all(np.isfinite(a)) and np.all(np.isfinite(b)))
        good = finite and err <= tol
        log(f"{name:<18} {f'rel_l2 {err:.3e} (tol {tol:.0e})':>26}  {'PASS' if good else 'FAIL'}")
        ok &= good
    for name in ("aux", "z"):
        a, b = ra[0]["meta"][name], rb[0]["meta"][name]
        err = abs(a - b) / abs(b) if b != 0 else abs(a - b)
        good = err <= ra[0]["meta"]["tolerances"][name]
        log(f"{name:<18} {f'rel {err:.3e}':>26}  {'PASS' if good else 'FAIL'}")
        ok &= good
    # The loss = <out, dout> + aux + z can cancel to near 0: its difference must be what the
    # differences of out, aux and z explain (Cauchy-Schwarz), as the in-process check demands.
    out_a = np.concatenate([r["out"].ravel() for r in ra]).astype(np.float64)
    out_b = np.concatenate([r["out"].ravel() for r in rb]).astype(np.float64)
    dout = np.concatenate([r["dout"].ravel() for r in ra]).astype(np.float64)
    ma, mb = ra[0]["meta"], rb[0]["meta"]
    bound = np.linalg.norm(out_a - out_b) * np.linalg.norm(dout) + abs(ma["aux"] - mb["aux"]) + \
        abs(ma["z"] - mb["z"])
    scale = np.linalg.norm(out_b) * np.linalg.norm(dout) + abs(mb["aux"]) + abs(mb["z"])
    diff = abs(ma["loss"] - mb["loss"])
    good = bool(np.isfinite(diff) and diff <= bound + 1e-9 * scale)
    log(f"{'loss':<18} {f'diff {diff:.3e} (bound {bound:.1e})':>26}  {'PASS' if good else 'FAIL'}")
    ok &= good
    log(f"compare_dumps: {'AGREE' if ok else 'DIFFER'} ({dir_a} vs {dir_b})")
    return ok


def main(argv):
    ap = argparse.ArgumentParser(prog="scripts/compare_dumps.py",
                                 description=__doc__.split("\n\n")[0],
                                 epilog="Example: scripts/compare_dumps.py dump_cpu dump_cuda")
    ap.add_argument("dir_a", metavar="DIR_A", help="dump directory (run --dump) of one run")
    ap.add_argument("dir_b", metavar="DIR_B", help="dump directory of the other run")
    a = ap.parse_args(argv[1:])
    try:
        return 0 if compare(a.dir_a, a.dir_b) else 1
    except Malformed as e:
        print(f"compare_dumps: malformed dump: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
