#!/usr/bin/python3
"""The self-test of verify_dump.py: a deliberately different "backend" (per-token loops with explicit
Jacobians), dumped in the moebench format, must pass the verifier; corrupted dumps must fail it, and the
verifier's own gradients must match central differences of its loss.

  verify_dump_selftest.py       (or verify_dump.py --self-test) exit 0: every expectation holds
"""
import argparse, json, os, shutil, sys, tempfile  # noqa: E401 (stdlib only, plus numpy)

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # importing verify_dump leaves no __pycache__ in the checkout
from verify_dump import (SHARED_GRADS, TOLERANCES, Malformed, f64, model, route,  # noqa: E402
                         softmax, verify)



def loop_backend(X, DOUT, Wg, bias, Win, Wout, c, tie_high=False, Wsi=None, Wso=None):
    """Straight from MATH.md, one token at a time. tie_high breaks exact ties towards the HIGHER id,
    which MATH.md allows as a near-tie flip, so the verifier's adoption path gets exercised. Wsi, Wso:
    the shared experts' [S, H, 2F_sh] and [S, F_sh, H], or None."""
    N, H = X.shape
    E, K, F, G, Gk = c["E"], c["K"], c["F"], c["groups"], c["group_topk"]
    softmax_score = c["score"] == "softmax"
    logits = [Wg.T @ X[t] for t in range(N)]
    routes = []
    for t in range(N):
        s = softmax(logits[t]) if softmax_score else 1.0 / (1.0 + np.exp(-logits[t]))
        q = [s[e] + (bias[e] if bias is not None else 0.0) for e in range(E)]
        allowed = list(range(E))
        if G > 1:
            size = E // G
            gsc = [sum(sorted(q[g * size:(g + 1) * size], reverse=True)[:K // Gk]) for g in range(G)]
            kept = sorted(range(G), key=lambda g: (-gsc[g], g))[:Gk]
            allowed = [e for e in allowed if e // size in kept]
        routes.append(sorted(allowed, key=lambda e: (-q[e], -e if tie_high else e))[:K])
    counts = np.bincount(np.ravel(routes), minlength=E).astype(f64)
    coef = c["aux_coeff"] * E / (K * N * N)
    out, dx, p_all, dWg = np.zeros((N, H)), np.zeros((N, H)), np.zeros((N, K)), np.zeros(Wg.shape)
    dWin, dWout = np.zeros(Win.shape), np.zeros(Wout.shape)
    shared = [] if Wsi is None else list(zip(Wsi, Wso, np.zeros(Wsi.shape), np.zeros(Wso.shape)))

    def ffn(t, wi, wo, w, Fw, dwi, dwo):
        """Token t through one SwiGLU FFN at weight w: out, dx and the (in-place) weight gradients."""
        h = X[t] @ wi
        g, u = h[:Fw], h[Fw:]
        sg = 1.0 / (1.0 + np.exp(-g))
        a = g * sg * u
        y = a @ wo
        out[t] += w * y
        dy = w * DOUT[t]
        da = wo @ dy
        dwo += np.outer(a, dy)
        dh = np.concatenate([da * u * (sg + g * sg * (1.0 - sg)), da * g * sg])
        dx[t] += wi @ dh
        dwi += np.outer(X[t], dh)
        return y
    aux = z = 0.0
    for t in range(N):
        l, ex = logits[t], routes[t]
        if softmax_score:
            s = softmax(l)
            Js = np.diag(s) - np.outer(s, s)                     # ds/dl
        else:
            s = 1.0 / (1.0 + np.exp(-l))
            Js = np.diag(s * (1.0 - s))
        if c["softmax_after_topk"]:
            pr = softmax(l[ex])
            Jp = np.zeros((K, E))
            Jp[:, ex] = np.diag(pr) - np.outer(pr, pr)
        else:
            pr, Jp = s[ex], Js[ex, :]
        if c["normalize_topk"]:
            S = pr.sum() + 1e-20
            Jn, pn = np.eye(K) / S - np.outer(pr, np.ones(K)) / S ** 2, pr / S
        else:
            Jn, pn = np.eye(K), pr
        p = c["scaling"] * pn
        Jfull = c["scaling"] * Jn @ Jp                          # dp/dl, [K, E]
        p_all[t] = p
        dp = np.zeros(K)
        for k, e in enumerate(ex):
            dp[k] = ffn(t, Win[e], Wout[e], p[k], F, dWin[e], dWout[e]) @ DOUT[t]
        for wi, wo, dwi, dwo in shared:
            ffn(t, wi, wo, 1.0, c["Fs"], dwi, dwo)
        dl = Jfull.T @ dp
        if softmax_score:
            r, Jr = s, Js
        else:
            S2 = s.sum()
            r, Jr = s / S2, (np.eye(E) / S2 - np.outer(s, np.ones(E)) / S2 ** 2) @ Js
        aux += coef * (counts @ r)
        dl += Jr.T @ (coef * counts)
        lse = np.log(np.sum(np.exp(l)))
        z += c["z_coeff"] / N * lse ** 2
        dl += c["z_coeff"] / N * 2.0 * lse * np.exp(l) / np.sum(np.exp(l))
        dx[t] += Wg @ dl
        dWg += np.outer(X[t], dl)
    loss = float(np.sum(out * DOUT)) + aux + z
    res = dict(idx=np.array(routes), p=p_all, out=out, dx=dx, dw_gate=dWg, dw_in=dWin, dw_out=dWout,
               aux=aux, z=z, loss=loss)
    if shared:
        res.update(dw_sh_in=np.array([v[2] for v in shared]), dw_sh_out=np.array([v[3] for v in shared]))
    return res


def to_bf16(a):
    """Round float32 values to the nearest bf16 (ties to even), kept as float32."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def make_case(d, router, dtype, seed, world=4, ep=2, T=6, H=16, F=8, E=8, K=2, tie=False, S=0, Fs=4):
    """Random inputs, loop_backend results, written as DIR/rank<R>/ the way moebench dumps them."""
    rng = np.random.default_rng(seed)
    c = dict(router, E=E, K=K, F=F, T=T, S=S, Fs=Fs if S else 0)
    N, El = world * T, E // ep
    rnd = (lambda a: to_bf16(a)) if dtype == "bf16" else (lambda a: np.asarray(a, np.float32))
    X, DOUT = rnd(rng.standard_normal((N, H))), rnd(rng.standard_normal((N, H)))
    Wg = rng.standard_normal((H, E)) / np.sqrt(H)
    if tie:
        Wg[:, E - 1] = Wg[:, E - 2]          # experts E-2 and E-1 tie exactly on every token
    Wg = rnd(Wg)
    bias = rnd(0.1 * rng.standard_normal(E)) if router["expert_bias"] else None
    Win = rnd(rng.standard_normal((E, H, 2 * F)) / np.sqrt(H))
    Wout = rnd(rng.standard_normal((E, F, H)) / np.sqrt(F))
    Wsi = rnd(rng.standard_normal((S, H, 2 * Fs)) / np.sqrt(H)) if S else None
    Wso = rnd(rng.standard_normal((S, Fs, H)) / np.sqrt(Fs)) if S else None
    as64 = lambda v: v.astype(f64) if v is not None else None
    b = loop_backend(*(as64(v) for v in (X, DOUT, Wg, bias, Win, Wout)), c, tie_high=tie,
                     Wsi=as64(Wsi), Wso=as64(Wso))
    outs = (lambda a: to_bf16(a)) if dtype == "bf16" else (lambda a: np.asarray(a, np.float32))
    for r in range(world):
        er, fr = r % ep, r // ep                 # rank = fsdp_rank * ep + ep_rank
        ts, es = slice(r * T, r * T + T), slice(er * El, er * El + El)
        rd = os.path.join(d, f"rank{r}")
        os.makedirs(rd)
        meta = dict(rank=r, world=world, ep=ep, fsdp=world // ep, ep_rank=er, fsdp_rank=fr,
                    experts_begin=er * El, experts_end=er * El + El, T=T, H=H, F=F, E=E, K=K,
                    shared_experts=S, shared_ffn=c["Fs"],
                    dtype=dtype, router=router, loss=b["loss"], aux=b["aux"], z=b["z"],
                    # As moebench writes them (core/check.cpp's tolerance_for, MATH.md).
                    tolerances={t: (1e-5 if dtype == "fp32" else 2e-2 if t.startswith("dw") else 1e-2)
                                for t in TOLERANCES + SHARED_GRADS})
        with open(os.path.join(rd, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        arrays = dict(x=X[ts], dout=DOUT[ts], w_gate=Wg, w_in=Win[es], w_out=Wout[es],
                      idx=b["idx"][ts].astype(np.int32), p=np.float32(b["p"][ts]), out=outs(b["out"][ts]),
                      dx=outs(b["dx"][ts]), dw_gate=np.float32(b["dw_gate"]),
                      dw_in=np.float32(b["dw_in"][es]), dw_out=np.float32(b["dw_out"][es]))
        if bias is not None:
            arrays["expert_bias"] = bias
        if S:
            arrays.update(w_sh_in=Wsi, w_sh_out=Wso, dw_sh_in=np.float32(b["dw_sh_in"]),
                          dw_sh_out=np.float32(b["dw_sh_out"]))
        for name, arr in arrays.items():
            np.save(os.path.join(rd, name + ".npy"), arr)
    return c, dict(X=X, DOUT=DOUT, Wg=Wg, bias=bias, Win=Win, Wout=Wout, Wsi=Wsi, Wso=Wso)


def fd_check(inp, c, rng, per_tensor=4):
    """Central differences of the verifier's loss (routing fixed) against its analytic gradient."""
    v = {k: (a.astype(f64) if a is not None else None) for k, a in inp.items()}
    idx = route(v["X"] @ v["Wg"], v["bias"], c)["idx"]
    shared = (v["Wsi"], v["Wso"]) if c["S"] else None
    loss = lambda: model(v["X"], v["DOUT"], v["Wg"], v["Win"], v["Wout"], idx, c, grad=False,
                         shared=shared)["loss"]
    ref = model(v["X"], v["DOUT"], v["Wg"], v["Win"], v["Wout"], idx, c, shared=shared)
    worst = 0.0
    pairs = (("X", "dx"), ("Wg", "dw_gate"), ("Win", "dw_in"), ("Wout", "dw_out")) + \
        ((("Wsi", "dw_sh_in"), ("Wso", "dw_sh_out")) if c["S"] else ())
    for key, gname in pairs:
        g, arr = ref[gname], v[key]
        cand = np.argwhere(np.abs(g) > 0.1 * np.abs(g).max())   # entries with a real gradient
        for i in cand[rng.choice(len(cand), size=min(per_tensor, len(cand)), replace=False)]:
            i = tuple(i)
            old, eps = arr[i], 1e-6
            arr[i] = old + eps
            lp = loss()
            arr[i] = old - eps
            lm = loss()
            arr[i] = old
            fd = (lp - lm) / (2 * eps)
            worst = max(worst, abs(fd - g[i]) / max(abs(g[i]), 1e-3 * np.abs(g).max()))
    return worst


def self_test():
    base = dict(score="softmax", softmax_after_topk=False, normalize_topk=False, scaling=1.0, groups=1,
                group_topk=1, expert_bias=False, aux_coeff=0.0, z_coeff=0.0)
    cases = [("softmax, exact ties flipped", base, "fp32", True, 0),
             ("sigmoid groups bias aux z, 2 shared experts", dict(
                 base, score="sigmoid", groups=4, group_topk=2, normalize_topk=True, scaling=2.5,
                 expert_bias=True, aux_coeff=0.01, z_coeff=0.001), "bf16", False, 2),
             ("softmax_after_topk groups, 1 shared expert", dict(
                 base, softmax_after_topk=True, normalize_topk=True, groups=2, group_topk=1, aux_coeff=0.01,
                 z_coeff=0.001), "fp32", False, 1)]
    quiet = lambda *a: None
    failures = []

    def expect(what, got, want):
        print(f"self-test: {what}: {got} (expected {want}) {'ok' if got == want else 'WRONG'}")
        if got != want:
            failures.append(what)

    def run(d):
        try:
            return 0 if verify(d, log=quiet)[0] else 1
        except Malformed:
            return 2

    tmp = tempfile.mkdtemp(prefix="verify_dump_selftest_")
    try:
        for n, (label, router, dtype, tie, S) in enumerate(cases):
            d = os.path.join(tmp, f"case{n}")
            c, inp = make_case(d, router, dtype, seed=100 + n, tie=tie, S=S)
            print(f"\n=== self-test case {n}: {label} ({dtype}) ===")
            worst = fd_check(inp, c, np.random.default_rng(n))
            expect(f"finite-difference gradient check (worst rel err {worst:.1e} <= 1e-5)", worst <= 1e-5, True)
            ok, rep = verify(d)
            expect("clean dump passes", ok, True)
            if tie:
                expect("exact ties broken to the higher id were adopted", rep.adopted > 0, True)

            def corrupt(name, rank, flat_index, value):   # a copy of the dump with one value changed
                dd = os.path.join(tmp, f"case{n}_{name}")
                shutil.copytree(d, dd)
                path = os.path.join(dd, f"rank{rank}", name + ".npy")
                a = np.load(path)
                a.flat[flat_index] = value(a.flat[flat_index], a)
                np.save(path, a)
                return dd

            dd = corrupt("dw_in", 1, 77, lambda v, a: v + 1.0 + 10.0 * np.abs(a).max())
            expect("one dw_in value corrupted on rank 1 -> exit", run(dd), 1)
            expect("NaN in out on rank 2 -> exit", run(corrupt("out", 2, 0, lambda v, a: np.nan)), 1)
            if S:
                dd = corrupt("dw_sh_out", 3, 5, lambda v, a: v + 1.0 + 10.0 * np.abs(a).max())
                expect("one dw_sh_out value corrupted on rank 3 -> exit", run(dd), 1)
                dd = corrupt("w_sh_in", 0, 0, lambda v, a: v + 0.5)
                expect("w_sh_in differing between ranks -> exit", run(dd), 1)
            # Routing: on the token furthest from any tie, swap in the expert with the lowest score.
            X, Wg = inp["X"].astype(f64), inp["Wg"].astype(f64)
            rt = route(X @ Wg, None if inp["bias"] is None else inp["bias"].astype(f64), c)
            t = int(np.argmax(np.minimum(rt["expert_gap"], rt["group_gap"])))
            low = [e for e in np.argsort(rt["q"][t]) if e not in rt["idx"][t]][0]

            T, K = c["T"], c["K"]
            dd = corrupt("idx", t // T, (t % T) * K + K - 1, lambda v, a: low)
            ok, rep = verify(dd, log=quiet)
            expect(f"token {t} routed to expert {low}: exit 1, routing row FAIL naming token {t}",
                   (ok, dict(rep.rows)["routing"], rep.mismatched), (False, False, [t]))
            os.remove(os.path.join(dd, "rank3", "dw_out.npy"))
            expect("missing rank3/dw_out.npy -> exit", run(dd), 2)
            shutil.rmtree(os.path.join(dd, "rank3"))
            expect("missing rank3 directory -> exit", run(dd), 2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nself-test: {'PASS' if not failures else 'FAIL: ' + '; '.join(failures)}")
    return 0 if not failures else 1


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    sys.exit(self_test())
