#!/usr/bin/python3
"""Tables and plots of moebench sweeps (scripts/sweep.sh).

    scripts/report.py DIR [DIR ...] [--x AXIS] [--out OUTDIR] [--no-plots]

Each DIR is a sweep folder results/<name>/<commit>: its index.json lists the points and their
result JSON. Several DIRs (other commits, other variants) are compared on the same plots.
Writes OUTDIR/report.md (default OUTDIR: the DIR, when there is one) with one Markdown table per
DIR, and PNG plots against AXIS (default: the first axis) of the step time, the TFLOP/s per rank
and the dispatch all-to-all bus bandwidth: one line per DIR and per value of the other axes.
Uses the standard library and Debian's python3-matplotlib (Agg), nothing else.
"""
import argparse
import json
import math
import os
import sys

PLOTS = [  # file, title, y label, value of a row
    ("step_ms.png", "Step time (median, p10-p90)", "step time per step, ms", "step"),
    ("tflops_per_rank.png", "Throughput", "TFLOP/s per rank (model FLOPs)", "tflops"),
    ("a2a_busbw.png", "Dispatch all-to-all (a2a_dispatch_fwd)", "busbw, GB/s", "busbw"),
]


class ReportError(Exception):
    pass


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise ReportError("%s: cannot read (%s)" % (path, e.strerror))
    except ValueError as e:
        raise ReportError("%s: not valid JSON (%s)" % (path, e))


def metrics(result, path):
    """The numbers of one result JSON that the report shows."""
    try:
        step = result["timing"]["step"]
        a2a = result["timing"]["phases"].get("a2a_dispatch_fwd", {})
        mesh = result["mesh"]
        corr = result.get("correctness", {})
        ep = int(mesh["ep"])
        # The slowest rank's median SM clock over the timed steps (timing.clocks; none on CPU).
        clocks = [r["sm_mhz"]["median"] for r in
                  result["timing"].get("clocks", {}).get("ranks", []) if r.get("samples")]
        return {
            "step": float(step["median"]), "p10": float(step["p10"]), "p90": float(step["p90"]),
            "tflops": float(result["throughput"]["tflops_per_rank"]),
            "algbw": a2a.get("algbw_gbps"),
            # One rank per EP group moves nothing over a link: no bus bandwidth to show.
            "busbw": a2a.get("busbw_gbps") if ep > 1 else None,
            "mesh": "%d (%dx%d)" % (mesh["world"], ep, mesh["fsdp"]),
            "sm_mhz": min(clocks) if clocks else None,
            "check": ("PASS" if corr.get("pass") else "FAIL") if corr.get("checked") else "off",
            "backend": result.get("provenance", {}).get("backend", "?"),
            "workload": result.get("config", {}),
        }
    except (KeyError, TypeError, ValueError) as e:
        raise ReportError("%s: not a moebench result (missing or bad %s)" % (path, e))


class Sweep:
    def __init__(self, folder):
        self.dir = os.path.normpath(folder)
        if not os.path.isdir(self.dir):
            raise ReportError("%s: not a folder" % folder)
        index_path = os.path.join(self.dir, "index.json")
        if not os.path.exists(index_path):
            raise ReportError("%s: no index.json: not a sweep folder (results/<name>/<commit>, "
                              "written by scripts/sweep.sh)" % folder)
        index = read_json(index_path)
        if not isinstance(index, list) or not all(
                isinstance(e, dict) and isinstance(e.get("axes"), dict) and "status" in e
                for e in index):
            raise ReportError("%s: malformed: expected a list of {point, axes, file, status}"
                              % index_path)
        if not index:
            raise ReportError("%s: empty: the sweep has no points yet" % index_path)
        self.axes = list(index[0]["axes"])
        for e in index:
            if list(e["axes"]) != self.axes:
                raise ReportError("%s: point %s has axes %s, others %s" % (
                    index_path, e.get("point"), list(e["axes"]), self.axes))
        meta = {}
        if os.path.exists(os.path.join(self.dir, "sweep.json")):
            meta = read_json(os.path.join(self.dir, "sweep.json"))
        self.name = meta.get("name") or os.path.basename(os.path.dirname(self.dir)) or "?"
        self.commit = meta.get("folder") or os.path.basename(self.dir)
        self.label = "%s %s" % (self.name, self.commit)
        self.rows = []
        for e in index:
            row = {"axes": e["axes"], "status": e["status"], "exit": e.get("exit"),
                   "log": e.get("log"), "m": None}
            path = os.path.join(self.dir, e["file"]) if e.get("file") else None
            if e["status"] == "ok":
                if not path or not os.path.exists(path):
                    raise ReportError("%s: point %s is ok in index.json but its result %s is "
                                      "missing" % (self.dir, e.get("point"), path))
                row["m"] = metrics(read_json(path), path)
            elif path and os.path.exists(path):  # a failed check still has its numbers
                try:
                    row["m"] = metrics(read_json(path), path)
                except ReportError:
                    pass
            self.rows.append(row)
        self.rows.sort(key=lambda r: [sort_key(r["axes"][a]) for a in self.axes])


def number(v):
    try:
        x = float(v)
        return x if math.isfinite(x) else None
    except (TypeError, ValueError):
        return None


def sort_key(v):
    x = number(v)
    return (0, x, "") if x is not None else (1, 0.0, str(v))


def fmt(v):
    """3 to 4 significant digits, never in exponent form for the usual ranges."""
    if v is None:
        return "-"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 1:
        return "%.2f" % v
    return "%.3g" % v


def table(sweep):
    head = sweep.axes + ["ranks (ep x fsdp)", "step ms (median)", "p10-p90 ms",
                         "TFLOP/s per rank", "a2a dispatch algbw GB/s", "busbw GB/s",
                         "SM MHz (slowest rank)", "check"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in sweep.rows:
        cells = [str(r["axes"][a]) for a in sweep.axes]
        m = r["m"]
        if m:
            cells += [m["mesh"], fmt(m["step"]), "%s-%s" % (fmt(m["p10"]), fmt(m["p90"])),
                      fmt(m["tflops"]), fmt(m["algbw"]), fmt(m["busbw"]), fmt(m["sm_mhz"]),
                      m["check"]]
        else:
            cells += ["-"] * 7
            cells.append("**%s**" % r["status"])
        if r["status"] != "ok":
            why = ("its result file is gone" if r["status"] == "missing" else
                   "exit %s" % r["exit"] if r["exit"] is not None else r["status"])
            cells[-1] = "**%s** (%s%s)" % (
                "FAIL" if m and m["check"] == "FAIL" else r["status"], why,
                ", %s" % r["log"] if r["log"] else "")
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return lines


def describe(sweep):
    ms = [r["m"] for r in sweep.rows if r["m"]]
    ok = sum(r["status"] == "ok" for r in sweep.rows)
    parts = ["%d points, %d ok" % (len(sweep.rows), ok)]
    if ms:
        w = ms[0]["workload"]

        def value(key):  # a workload key's value, or "swept" where it is an axis
            if key in sweep.axes:
                return "swept"
            v = w
            for part in key.split("."):
                v = v.get(part, {}) if isinstance(v, dict) else None
            return v if v != {} else "?"
        shape = ", ".join("%s %s" % (short, value(key)) for short, key in [
            ("H", "model.hidden"), ("F", "model.ffn"), ("E", "model.experts"),
            ("K", "model.topk"), ("tokens_per_rank", "tokens_per_rank"), ("dtype", "dtype"),
            ("router", "router.score")])
        parts.insert(0, "workload `%s` (%s)" % (w.get("name", "?"), shape))
        backends = sorted({m["backend"] for m in ms})
        parts.append("backend %s" % "/".join(backends))
        if len(backends) > 1:
            parts.append("**mixed backends**")
    return "; ".join(parts) + "; folder `%s`" % sweep.dir


def plot(sweeps, x_axis, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs_all = [r["axes"][x_axis] for s in sweeps for r in s.rows if r["status"] == "ok"]
    if not xs_all:
        xs_all = [r["axes"][x_axis] for s in sweeps for r in s.rows]
    numeric = all(number(v) is not None for v in xs_all)
    if numeric:
        ticks = sorted({number(v) for v in xs_all})
        pos = lambda v: number(v)
    else:
        cats = sorted(set(map(str, xs_all)), key=sort_key)
        ticks = list(range(len(cats)))
        pos = lambda v: cats.index(str(v))
    log2 = numeric and len(ticks) >= 3 and ticks[0] > 0 and ticks[-1] / ticks[0] >= 4
    styles = ["-", "--", ":", "-."]
    markers = ["o", "s", "^", "D", "v", "P", "X"]
    files = []
    for fname, title, ylabel, key in PLOTS:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        for si, s in enumerate(sweeps):
            others = [a for a in s.axes if a != x_axis]
            groups = {}
            for r in s.rows:
                g = tuple(r["axes"][a] for a in others)
                groups.setdefault(g, []).append(r)
            gkeys = sorted(groups, key=lambda g: [sort_key(v) for v in g])
            for gi, g in enumerate(gkeys):
                pts = sorted(((pos(r["axes"][x_axis]), r["m"]) for r in groups[g]
                              if r["status"] == "ok" and r["m"] and r["m"][key] is not None),
                             key=lambda p: p[0])
                if not pts:
                    continue
                label = s.label
                if others:
                    label += " " + ", ".join("%s=%s" % kv for kv in zip(others, g))
                if len(gkeys) > 1:
                    color, style = "C%d" % (gi % 10), styles[si % len(styles)]
                else:
                    color, style = "C%d" % (si % 10), "-"
                px = [p[0] for p in pts]
                py = [p[1][key] for p in pts]
                if key == "step":
                    err = [[p[1]["step"] - p[1]["p10"] for p in pts],
                           [p[1]["p90"] - p[1]["step"] for p in pts]]
                    ax.errorbar(px, py, yerr=err, color=color, linestyle=style, capsize=3,
                                marker=markers[si % len(markers)], label=label)
                else:
                    ax.plot(px, py, color=color, linestyle=style,
                            marker=markers[si % len(markers)], label=label)
        if log2:
            ax.set_xscale("log", base=2)
        ax.set_xticks(ticks)
        ax.set_xticklabels([("%g" % t) if numeric else cats[t] for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel(x_axis)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center")
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, fname), dpi=110)
        plt.close(fig)
        files.append((fname, title))
    return files


def main(argv):
    ap = argparse.ArgumentParser(
        prog="scripts/report.py", description=__doc__.split("\n\n")[0],
        epilog="Example: scripts/report.py results/tokens/5f9abd5 results/tokens/e937d1b "
               "--x tokens_per_rank --out /tmp/report")
    ap.add_argument("dirs", nargs="+", metavar="DIR", help="sweep folder results/<name>/<commit>")
    ap.add_argument("--x", metavar="AXIS", help="axis of the plots' x (default: the first axis)")
    ap.add_argument("--out", metavar="OUTDIR",
                    help="where report.md and the PNGs go (default: DIR, when there is one DIR)")
    ap.add_argument("--no-plots", action="store_true", help="the tables alone, no matplotlib")
    args = ap.parse_args(argv)
    if args.out is None:
        if len(args.dirs) > 1:
            ap.error("--out OUTDIR is needed with several DIRs")
        args.out = args.dirs[0]
    if not args.no_plots:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ReportError("matplotlib is missing: install Debian's python3-matplotlib "
                              "(scripts/install_deps.sh does), or pass --no-plots for the "
                              "tables alone")
    sweeps = [Sweep(d) for d in args.dirs]
    labels = [s.label for s in sweeps]
    for i, s in enumerate(sweeps):  # the same sweep twice (copies): keep the lines apart
        if labels.count(s.label) > 1:
            s.label += " #%d" % (labels[:i + 1].count(s.label))
    x_axis = args.x or sweeps[0].axes[0]
    for s in sweeps:
        if x_axis not in s.axes:
            raise ReportError("%s: has no axis %s (its axes: %s)" % (s.dir, x_axis,
                                                                       ", ".join(s.axes)))
    os.makedirs(args.out, exist_ok=True)
    files = [] if args.no_plots else plot(sweeps, x_axis, args.out)

    md = ["# moebench sweep report", ""]
    md.append("Step time: median over the timed steps of the per-step maximum over ranks (p10-p90 "
              "beside it). TFLOP/s per rank: model FLOPs / ranks / median step. All-to-all: the "
              "dispatch forward (`timing.phases.a2a_dispatch_fwd`), bandwidths as nccl-tests "
              "(busbw = algbw * (ep-1)/ep; `-` at ep 1, where nothing crosses a link). SM MHz: "
              "the slowest rank's median SM clock over the timed steps (`timing.clocks`; `-` "
              "where none was sampled, as on the CPU backend): at a power cap a slower point "
              "may be its clocks'.")
    md.append("")
    for s in sweeps:
        md += ["## %s" % s.label, "", describe(s), ""] + table(s) + [""]
    if files:
        md += ["## Plots against %s" % x_axis, ""]
        for fname, title in files:
            md += ["![%s](%s)" % (title, fname), ""]
    path = os.path.join(args.out, "report.md")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(md))
    os.replace(path + ".tmp", path)
    print("report.py: wrote %s%s" % (path, "".join(", " + f for f, _ in files)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ReportError as e:
        print("report.py: %s" % e, file=sys.stderr)
        sys.exit(2)
