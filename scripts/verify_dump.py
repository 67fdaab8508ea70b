#!/usr/bin/python3
"""Independent float64 check of a moebench dump against the layer defined in MATH.md.

  verify_dump.py DIR [--tol-scale S]    exit 0: every check passes, 1: a check fails, 2: malformed dump
  verify_dump.py --self-test            builds tiny dumps with a separate per-token implementation

DIR/rank<R>/ holds meta.json and float32 .npy files (idx int32) written by rank R after the checked step.
Everything is recomputed in float64 from the dumped (already rounded) inputs; only numpy + stdlib.
"""
import argparse, json, os, re, shutil, sys, tempfile  # noqa: E401 (stdlib only, plus numpy)

import numpy as np

f64 = np.float64
NEAR_TIE_REL = 1e-3  # MATH.md: a routing flip is legitimate where the scores differ by <= 1e-3 relative
PER_RANK_KEYS = ("rank", "ep_rank", "fsdp_rank", "experts_begin", "experts_end", "loss", "aux", "z")
META_KEYS = ("rank", "world", "ep", "fsdp", "ep_rank", "fsdp_rank", "experts_begin", "experts_end",
             "T", "H", "F", "E", "K", "dtype", "router", "loss", "aux", "z")
# The tensors whose check tolerance the dump carries (meta.json "tolerances").
TOLERANCES = ("out", "dx", "p", "aux", "z", "dw_gate", "dw_in", "dw_out")
ROUTER_KEYS = ("score", "softmax_after_topk", "normalize_topk", "scaling", "groups", "group_topk",
               "expert_bias", "aux_coeff", "z_coeff")


class Malformed(Exception):
    pass


class Unsupported(Exception):
    pass


# ----------------------------------------------------------------------------------------------------
# The layer, vectorised (the verifier's reference)

def softmax(a):
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def sigmoid(a):
    return 0.5 * (1.0 + np.tanh(0.5 * a))  # no overflow for large |a|


def scores(logits, kind):
    return softmax(logits) if kind == "softmax" else sigmoid(logits)


def rel_gap(a, b):
    """|a - b| / max(|a|, |b|); inf when a value is missing (-inf) so that it never counts as a tie."""
    a, b = np.asarray(a, f64), np.asarray(b, f64)
    with np.errstate(invalid="ignore", divide="ignore"):
        g = np.abs(a - b) / np.maximum(np.abs(a), np.abs(b))
    g = np.where(a == b, 0.0, g)
    return np.where(np.isfinite(a) & np.isfinite(b), g, np.inf)


def route(logits, bias, c):
    """MATH.md steps 2-5 for all tokens. Ties go to the lower id: stable sorts on the negated score."""
    N, E = logits.shape
    K, G, Gk = c["K"], c["groups"], c["group_topk"]
    s = scores(logits, c["score"])
    q = s + bias[None, :] if bias is not None else s          # bias steers selection only
    sel, gs, gs_sorted = np.ones((N, E), bool), None, None
    if G > 1:
        qg = q.reshape(N, G, E // G)
        gs = -np.sort(-qg, axis=2)[:, :, :K // Gk].sum(axis=2)  # group score: sum of its top K/Gk
        gorder = np.argsort(-gs, axis=1, kind="stable")
        keep = np.zeros((N, G), bool)
        np.put_along_axis(keep, gorder[:, :Gk], True, axis=1)
        sel = np.repeat(keep, E // G, axis=1)
        gs_sorted = np.take_along_axis(gs, gorder, axis=1)
    qm = np.where(sel, q, -np.inf)
    order = np.argsort(-qm, axis=1, kind="stable")
    qs = np.take_along_axis(qm, order, axis=1)
    qk1 = qs[:, K] if K < E else np.full(N, -np.inf)            # -inf: fewer than K+1 selectable
    return dict(s=s, q=q, sel=sel, idx=order[:, :K], gscore=gs, gs=gs_sorted, qK=qs[:, K - 1],
                expert_gap=rel_gap(qs[:, K - 1], qk1),
                group_gap=rel_gap(gs_sorted[:, Gk - 1], gs_sorted[:, Gk]) if G > 1 and Gk < G
                else np.full(N, np.inf))


def model(X, DOUT, Wg, Win, Wout, idx, c, grad=True):
    """Forward, losses and (grad=True) the full backward of MATH.md for fixed routing idx [N, K]."""
    N, H = X.shape
    E, K, F = c["E"], c["K"], c["F"]
    logits = X @ Wg
    s = scores(logits, c["score"])
    if c["softmax_after_topk"]:
        praw = softmax(np.take_along_axis(logits, idx, axis=1))
    else:
        praw = np.take_along_axis(s, idx, axis=1)
    S = praw.sum(axis=1, keepdims=True) + 1e-20
    pn = praw / S if c["normalize_topk"] else praw
    p = c["scaling"] * pn

    out, dp = np.zeros((N, H)), np.zeros((N, K))
    dX, dWin, dWout = np.zeros((N, H)), np.zeros(Win.shape), np.zeros(Wout.shape)
    for e in range(E):
        t, k = np.nonzero(idx == e)       # each token at most once per expert: t has no repeats
        if t.size == 0:
            continue
        xe, wi, wo = X[t], Win[e].astype(f64), Wout[e].astype(f64)
        h = xe @ wi
        g, u = h[:, :F], h[:, F:]
        sg = sigmoid(g)
        silu = g * sg
        a = silu * u                       # a = silu(gate) * up
        y = a @ wo
        out[t] += p[t, k, None] * y
        dp[t, k] = np.einsum("nh,nh->n", y, DOUT[t])
        if grad:
            dy = p[t, k, None] * DOUT[t]
            da = dy @ wo.T
            dWout[e] = a.T @ dy
            dg = da * u * sg * (1.0 + g * (1.0 - sg))   # silu'(g) = sig(g) (1 + g (1 - sig(g)))
            du = da * silu
            dh = np.concatenate([dg, du], axis=1)
            dX[t] += dh @ wi.T
            dWin[e] = xe.T @ dh

    counts = np.bincount(idx.ravel(), minlength=E).astype(f64)   # c_e: constants for the gradient
    ssum = s.sum(axis=1, keepdims=True)
    rr = s if c["score"] == "softmax" else s / ssum
    coef = c["aux_coeff"] * E / (K * N * N)
    aux = coef * float(counts @ rr.sum(axis=0))
    m = logits.max(axis=1)
    lse = m + np.log(np.exp(logits - m[:, None]).sum(axis=1))
    z = c["z_coeff"] / N * float((lse ** 2).sum())
    res = dict(idx=idx, p=p, out=out, aux=aux, z=z, loss=float((out * DOUT).sum()) + aux + z)
    if not grad:
        return res

    # dp -> dlogits: back through scaling, normalize_topk (p_j / S), and the gather or top-k softmax.
    dpn = c["scaling"] * dp
    dpraw = dpn / S - (dpn * praw).sum(axis=1, keepdims=True) / S ** 2 if c["normalize_topk"] else dpn
    dlog, ds = np.zeros((N, E)), np.zeros((N, E))
    if c["softmax_after_topk"]:
        dsel = praw * (dpraw - (dpraw * praw).sum(axis=1, keepdims=True))
        np.put_along_axis(dlog, idx, dsel, axis=1)
    else:
        np.put_along_axis(ds, idx, dpraw, axis=1)                  # idx distinct within a row
    # aux: dL/dr[t, e] = coef * c_e; r = s (softmax) or s / sum(s) (sigmoid).
    dr = np.broadcast_to(coef * counts[None, :], (N, E))
    if c["score"] == "softmax":
        ds = ds + dr
        dlog += s * (ds - (ds * s).sum(axis=1, keepdims=True))
    else:
        ds = ds + dr / ssum - (dr * s).sum(axis=1, keepdims=True) / ssum ** 2
        dlog += ds * s * (1.0 - s)
    dlog += (2.0 * c["z_coeff"] / N) * lse[:, None] * softmax(logits)   # d lse / d logits = softmax
    dX += dlog @ Wg.T
    res.update(dx=dX, dw_gate=X.T @ dlog, dw_in=dWin, dw_out=dWout)
    return res


# ----------------------------------------------------------------------------------------------------
# Loading a dump

def load_dump(d, allow_controls=False):
    """Loads a dump. A dump of a routing control (a forced routing.mode, a capacity) is refused
    with Unsupported unless allow_controls: compare_dumps can compare two such dumps, this verifier
    cannot recompute them."""
    if not os.path.isdir(d):
        raise Malformed(f"{d}: not a directory")
    dirs = {int(n[4:]): os.path.join(d, n) for n in os.listdir(d)
            if re.fullmatch(r"rank\d+", n) and os.path.isdir(os.path.join(d, n))}
    if not dirs:
        raise Malformed(f"{d}: no rank<R> directories")
    metas = {}
    for rk, rd in dirs.items():
        path = os.path.join(rd, "meta.json")
        try:
            with open(path) as f:
                m = json.load(f)
        except (OSError, ValueError) as e:
            raise Malformed(f"{path}: {e}")
        missing = [k for k in META_KEYS if k not in m] + \
                  [f"router.{k}" for k in ROUTER_KEYS if k not in m.get("router", {})]
        if missing:
            raise Malformed(f"{path}: missing keys {missing}")
        metas[rk] = m
    m0 = metas[min(metas)]
    ints = [k for k in ("world", "ep", "fsdp", "T", "H", "F", "E", "K") if not isinstance(m0[k], int)] + \
        [f"router.{k}" for k in ("groups", "group_topk") if not isinstance(m0["router"][k], int)]
    if ints:
        raise Malformed(f"rank{min(metas)}/meta.json: {ints} must be integers")
    world = m0["world"]
    if sorted(dirs) != list(range(world)):
        raise Malformed(f"{d}: meta world={world} but rank dirs {sorted(dirs)}")
    for rk, m in metas.items():
        diff = [k for k in m0 if k not in PER_RANK_KEYS and m.get(k) != m0[k]]
        if diff:
            raise Malformed(f"rank{rk}/meta.json disagrees with rank{min(metas)} on {diff}")
    # The routing controls (README "Routing controls") are moebench's, not MATH.md's: this verifier
    # implements MATH.md only. Dumps from before these keys existed are learned and dropless.
    controls = m0.get("routing", {}).get("mode", "learned") != "learned" or \
        m0.get("capacity_factor") is not None
    if controls and not allow_controls:
        raise Unsupported(f"{d}: routing.mode={m0.get('routing', {}).get('mode')}, capacity_factor="
                          f"{m0.get('capacity_factor')}: this verifier covers MATH.md's learned, dropless "
                          "layer only (the in-process reference checks the routing controls); dump a run "
                          "with routing.mode=learned and capacity_factor=null")
    c = dict(m0["router"], **{k: m0[k] for k in ("world", "ep", "fsdp", "T", "H", "F", "E", "K", "dtype")})
    E, K, G, Gk, ep = c["E"], c["K"], c["groups"], c["group_topk"], c["ep"]
    bad = [why for cond, why in [
        (world == ep * c["fsdp"], "world != ep * fsdp"), (E % ep == 0, "E % ep != 0"),
        (0 < K <= E, "K not in [1, E]"), (G >= 1 and E % G == 0, "E % groups != 0"),
        (1 <= Gk <= G and K % Gk == 0, "group_topk must divide K and be <= groups"),
        (K // Gk <= E // G and K <= Gk * (E // G), "K too large for the kept groups"),
        (c["score"] in ("softmax", "sigmoid"), "router.score"), (c["dtype"] in ("bf16", "fp32"), "dtype"),
        (not c["softmax_after_topk"] or c["score"] == "softmax", "softmax_after_topk needs softmax")] if not cond]
    if bad:
        raise Malformed(f"{d}: bad metadata: {bad}")
    T, H, F, El = c["T"], c["H"], c["F"], E // ep
    shapes = dict(x=(T, H), dout=(T, H), w_gate=(H, E), w_in=(El, H, 2 * F), w_out=(El, F, H),
                  idx=(T, K), p=(T, K), out=(T, H), dx=(T, H), dw_gate=(H, E),
                  dw_in=(El, H, 2 * F), dw_out=(El, F, H))
    if c["expert_bias"]:
        shapes["expert_bias"] = (E,)
    ranks = []
    for rk in range(world):
        m = metas[rk]
        er, fr = m["ep_rank"], m["fsdp_rank"]
        if m["rank"] != rk or rk != fr * ep + er or not 0 <= er < ep or \
                (m["experts_begin"], m["experts_end"]) != (er * El, er * El + El):
            raise Malformed(f"rank{rk}/meta.json: rank/ep_rank/fsdp_rank/experts_* break the layout "
                            f"rank = fsdp_rank*ep + ep_rank, experts [ep_rank*E/ep, +E/ep)")
        if not all(isinstance(m[k], (int, float)) for k in ("loss", "aux", "z")):
            raise Malformed(f"rank{rk}/meta.json: loss, aux and z must be numbers")
        tols = m.get("tolerances")
        if not isinstance(tols, dict) or not all(isinstance(tols.get(t), (int, float)) for t in TOLERANCES):
            raise Malformed(f"rank{rk}/meta.json: no tolerances for {list(TOLERANCES)} (moebench "
                            f"writes the check's into every dump; this one is older): dump again")
        a = dict(meta=m)
        for name, shp in shapes.items():
            path = os.path.join(dirs[rk], name + ".npy")
            try:
                arr = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as e:
                raise Malformed(f"{path}: {e}")
            want = np.int32 if name == "idx" else np.float32
            if arr.dtype != want or arr.shape != shp:
                raise Malformed(f"{path}: {arr.dtype}{list(arr.shape)}, expected "
                                f"{np.dtype(want)}{list(shp)}")
            a[name] = arr
        ranks.append(a)
    return c, ranks


# ----------------------------------------------------------------------------------------------------
# Verification

class Report:
    def __init__(self, log):
        self.rows, self.log = [], log
        self.adopted, self.mismatched = 0, []   # routing: near ties taken from the dump, real mismatches

    def row(self, name, rel, mx, tol, ok, note=""):
        self.rows.append((name, ok))
        fmt = lambda v: f"{v:10.3e}" if isinstance(v, float) else f"{v:>10}"
        self.log(f"{name:<16} {fmt(rel)} {fmt(mx)} {fmt(tol)}  {'PASS' if ok else 'FAIL'}  {note}")

    def compare(self, name, gots, refs, tol):
        """Per rank rel_l2 and max abs error; the row shows the worst rank."""
        worst, worst_rank, mx, nonfinite = -1.0, 0, 0.0, []
        for rk, (got, ref) in enumerate(zip(gots, refs)):
            got = np.asarray(got, f64)
            if not np.all(np.isfinite(got)):
                nonfinite.append(rk)
                continue
            dn, rn = np.linalg.norm(got - ref), np.linalg.norm(ref)
            rel = 0.0 if dn == 0 else (dn / rn if rn > 0 else np.inf)
            mx = max(mx, float(np.max(np.abs(got - ref), initial=0.0)))
            if rel > worst:
                worst, worst_rank = rel, rk
        note = f"NaN/Inf on ranks {nonfinite}" if nonfinite else f"worst rank {worst_rank}"
        self.row(name, float(max(worst, 0.0)), mx, tol, not nonfinite and worst <= tol, note)


def verify(d, tol_scale=1.0, log=print):
    c, ranks = load_dump(d)
    E, K, T, ep, world = c["E"], c["K"], c["T"], c["ep"], c["world"]
    N = world * T
    rep = Report(log)
    log(f"verify_dump: {d}: world {world} (ep {ep} x fsdp {c['fsdp']}), N {N} H {c['H']} F {c['F']} "
        f"E {E} K {K}, {c['dtype']}, router {json.dumps({k: c[k] for k in ROUTER_KEYS})}")
    log(f"{'tensor':<16} {'rel_l2':>10} {'max_abs':>10} {'tol':>10}  status")

    # Replicated inputs must be bit-identical where the layout says they are the same tensor.
    def spread(arrs):
        return max(float(np.max(np.abs(a.astype(f64) - arrs[0]), initial=0.0)) for a in arrs)
    rw = [spread([a["w_gate"] for a in ranks])]
    if c["expert_bias"]:
        rw.append(spread([a["expert_bias"] for a in ranks]))
    rep.row("router replicas", "-", max(rw), 0.0, max(rw) == 0.0, "w_gate/expert_bias on all ranks")
    sw = [spread([ranks[f * ep + j][w] for f in range(c["fsdp"])]) for j in range(ep)
          for w in ("w_in", "w_out")]
    rep.row("fsdp replicas", "-", max(sw), 0.0, max(sw) == 0.0, "w_in/w_out on FSDP peers")

    X = np.concatenate([a["x"] for a in ranks]).astype(f64)      # rank r: tokens r*T .. r*T+T-1
    DOUT = np.concatenate([a["dout"] for a in ranks]).astype(f64)
    Wg = ranks[0]["w_gate"].astype(f64)
    bias = ranks[0]["expert_bias"].astype(f64) if c["expert_bias"] else None
    Win = np.concatenate([ranks[j]["w_in"] for j in range(ep)])    # expert e on ep_rank e // El
    Wout = np.concatenate([ranks[j]["w_out"] for j in range(ep)])
    fin = all(np.all(np.isfinite(v)) for v in (X, DOUT, Wg, Win, Wout))
    rep.row("inputs finite", "-", "-", "-", fin, "x, dout, w_gate, w_in, w_out")
    if not fin:
        log(f"verify_dump: {sum(ok for _, ok in rep.rows)}/{len(rep.rows)} FAIL")
        return False, rep

    # Routing: the dumped expert set must equal ours, except at a near tie where either may win.
    rt = route(X @ Wg, bias, c)
    dumped = np.concatenate([a["idx"] for a in ranks]).astype(np.int64)
    same = np.sort(dumped, axis=1) == np.sort(rt["idx"], axis=1)
    idx, adopted, bad = dumped.copy(), 0, []
    size = E // c["groups"]
    for t in np.nonzero(~same.all(axis=1))[0]:
        D, R = set(dumped[t].tolist()), set(rt["idx"][t].tolist())
        e_tie = rt["expert_gap"][t] <= NEAR_TIE_REL
        g_tie = rt["group_gap"][t] <= NEAR_TIE_REL
        ok = len(D) == K and all(0 <= e < E for e in D) and (e_tie or g_tie)
        if ok and c["groups"] > 1:  # every swapped-in expert must sit in a kept or near-tied group
            gk = rt["gs"][t, c["group_topk"] - 1]
            near_g = {g for g in range(c["groups"])
                      if rt["sel"][t, g * size] or rel_gap(rt["gscore"][t, g], gk) <= NEAR_TIE_REL}
            ok = all(e // size in near_g for e in D - R)
        # a swap at the K-th place brings in experts whose q ties the K-th q (or any expert of a
        # flipped group)
        ok = ok and all(g_tie or rel_gap(rt["q"][t, e], rt["qK"][t]) <= NEAR_TIE_REL for e in D - R)
        if ok:
            adopted += 1
        else:
            idx[t] = rt["idx"][t]
            bad.append(t)
    rep.adopted, rep.mismatched = adopted, bad
    rep.row("routing", "-", "-", "-", not bad,
            f"{len(bad)} mismatched of {N} tokens, {adopted} near ties adopted")
    for t in bad[:5]:
        log(f"    token {t} (rank {t // T}): dumped {dumped[t].tolist()} reference {rt['idx'][t].tolist()} "
            f"expert gap {rt['expert_gap'][t]:.2e} group gap {rt['group_gap'][t]:.2e}")

    ref = model(X, DOUT, Wg, Win, Wout, idx, c)
    # The check's own tolerances (MATH.md), as moebench wrote them into the dump.
    tol = {t: v * tol_scale for t, v in ranks[0]["meta"]["tolerances"].items()}
    tok = [slice(r * T, r * T + T) for r in range(world)]
    exp = [slice(a["meta"]["experts_begin"], a["meta"]["experts_end"]) for a in ranks]
    for name in ("p", "out", "dx"):
        rep.compare(name, [a[name] for a in ranks], [ref[name][s] for s in tok], tol[name])
    rep.compare("dw_gate", [a["dw_gate"] for a in ranks], [ref["dw_gate"]] * world, tol["dw_gate"])
    for name in ("dw_in", "dw_out"):
        rep.compare(name, [a[name] for a in ranks], [ref[name][s] for s in exp], tol[name])
    for name in ("aux", "z", "loss"):
        rep.compare(name, [np.float64(a["meta"][name]) for a in ranks], [np.float64(ref[name])] * world,
                    tol.get(name, tol["out"]))
    npass = sum(ok for _, ok in rep.rows)
    all_ok = npass == len(rep.rows)
    log(f"verify_dump: {npass}/{len(rep.rows)} {'PASS' if all_ok else 'FAIL'}")
    return all_ok, rep


# ----------------------------------------------------------------------------------------------------
# Self-test: a deliberately different "backend" (per-token loops with explicit Jacobians), dumped in
# the moebench format, must pass; corrupted dumps must fail.

def loop_backend(X, DOUT, Wg, bias, Win, Wout, c, tie_high=False):
    """Straight from MATH.md, one token at a time. tie_high breaks exact ties towards the HIGHER id,
    which MATH.md allows as a near-tie flip, so the verifier's adoption path gets exercised."""
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
            h = X[t] @ Win[e]
            g, u = h[:F], h[F:]
            sg = 1.0 / (1.0 + np.exp(-g))
            a = g * sg * u
            y = a @ Wout[e]
            out[t] += p[k] * y
            dp[k], dy = y @ DOUT[t], p[k] * DOUT[t]
            da = Wout[e] @ dy
            dWout[e] += np.outer(a, dy)
            dh = np.concatenate([da * u * (sg + g * sg * (1.0 - sg)), da * g * sg])
            dx[t] += Win[e] @ dh
            dWin[e] += np.outer(X[t], dh)
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
    return dict(idx=np.array(routes), p=p_all, out=out, dx=dx, dw_gate=dWg, dw_in=dWin, dw_out=dWout,
                aux=aux, z=z, loss=loss)


def to_bf16(a):
    """Round float32 values to the nearest bf16 (ties to even), kept as float32."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def make_case(d, router, dtype, seed, world=4, ep=2, T=6, H=16, F=8, E=8, K=2, tie=False):
    """Random inputs, loop_backend results, written as DIR/rank<R>/ the way moebench dumps them."""
    rng = np.random.default_rng(seed)
    c = dict(router, E=E, K=K, F=F, T=T)
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
    b = loop_backend(*(v.astype(f64) if v is not None else None for v in (X, DOUT, Wg, bias, Win, Wout)),
                     c, tie_high=tie)
    outs = (lambda a: to_bf16(a)) if dtype == "bf16" else (lambda a: np.asarray(a, np.float32))
    for r in range(world):
        er, fr = r % ep, r // ep                 # rank = fsdp_rank * ep + ep_rank
        ts, es = slice(r * T, r * T + T), slice(er * El, er * El + El)
        rd = os.path.join(d, f"rank{r}")
        os.makedirs(rd)
        meta = dict(rank=r, world=world, ep=ep, fsdp=world // ep, ep_rank=er, fsdp_rank=fr,
                    experts_begin=er * El, experts_end=er * El + El, T=T, H=H, F=F, E=E, K=K,
                    dtype=dtype, router=router, loss=b["loss"], aux=b["aux"], z=b["z"],
                    # As moebench writes them (core/check.cpp's tolerance_for, MATH.md).
                    tolerances={t: (1e-5 if dtype == "fp32" else 2e-2 if t.startswith("dw") else 1e-2)
                                for t in TOLERANCES})
        with open(os.path.join(rd, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        arrays = dict(x=X[ts], dout=DOUT[ts], w_gate=Wg, w_in=Win[es], w_out=Wout[es],
                      idx=b["idx"][ts].astype(np.int32), p=np.float32(b["p"][ts]), out=outs(b["out"][ts]),
                      dx=outs(b["dx"][ts]), dw_gate=np.float32(b["dw_gate"]),
                      dw_in=np.float32(b["dw_in"][es]), dw_out=np.float32(b["dw_out"][es]))
        if bias is not None:
            arrays["expert_bias"] = bias
        for name, arr in arrays.items():
            np.save(os.path.join(rd, name + ".npy"), arr)
    return c, dict(X=X, DOUT=DOUT, Wg=Wg, bias=bias, Win=Win, Wout=Wout)


def fd_check(inp, c, rng, per_tensor=4):
    """Central differences of the verifier's loss (routing fixed) against its analytic gradient."""
    v = {k: (a.astype(f64) if a is not None else None) for k, a in inp.items()}
    idx = route(v["X"] @ v["Wg"], v["bias"], c)["idx"]
    loss = lambda: model(v["X"], v["DOUT"], v["Wg"], v["Win"], v["Wout"], idx, c, grad=False)["loss"]
    ref = model(v["X"], v["DOUT"], v["Wg"], v["Win"], v["Wout"], idx, c)
    worst = 0.0
    for key, gname in (("X", "dx"), ("Wg", "dw_gate"), ("Win", "dw_in"), ("Wout", "dw_out")):
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
    cases = [("softmax, exact ties flipped", base, "fp32", True),
             ("sigmoid groups bias aux z", dict(base, score="sigmoid", groups=4, group_topk=2,
                                                normalize_topk=True, scaling=2.5, expert_bias=True,
                                                aux_coeff=0.01, z_coeff=0.001), "bf16", False),
             ("softmax_after_topk groups", dict(base, softmax_after_topk=True, normalize_topk=True, groups=2,
                                                group_topk=1, aux_coeff=0.01, z_coeff=0.001), "fp32", False)]
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
        for n, (label, router, dtype, tie) in enumerate(cases):
            d = os.path.join(tmp, f"case{n}")
            c, inp = make_case(d, router, dtype, seed=100 + n, tie=tie)
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?", help="dump directory holding rank<R>/ subdirectories")
    ap.add_argument("--tol-scale", type=float, default=1.0, help="multiply every tolerance by S")
    ap.add_argument("--self-test", action="store_true", help="run the built-in self-test")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.dir or not a.tol_scale > 0:
        ap.error("need DIR and a positive --tol-scale")
    try:
        return 0 if verify(a.dir, a.tol_scale)[0] else 1
    except Malformed as e:
        print(f"verify_dump: malformed dump: {e}", file=sys.stderr)
        return 2
    except Unsupported as e:
        print(f"verify_dump: unsupported dump: {e}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
