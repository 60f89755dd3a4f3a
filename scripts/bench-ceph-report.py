#!/usr/bin/env python3
"""Tables and plots for scripts/bench-ceph.sh: medians over the rounds of every workload, for
eagernfs, nfs-ganesha FSAL_CEPH and native CephFS, with ratios; writes DIR/ratios.svg and
DIR/callrate.svg and prints Markdown.

    bench-ceph-report.py DIR CLK_TCK SECONDS STREAM_MIB
"""
import gzip
import json
import os
import statistics
import sys
from collections import defaultdict

out, hz, seconds, stream_mib = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
PEERS = ["eagernfs", "ganesha", "ganesha-tuned", "native"]
NAMES = {
    "eagernfs": "eagernfs",
    "ganesha": "nfs-ganesha FSAL_CEPH",
    "ganesha-tuned": "nfs-ganesha FSAL_CEPH, eagernfs's libcephfs settings",
    "native": "native CephFS",
}

rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "results.tsv")) if l.strip()]
vals = defaultdict(list)  # (peer, metric) -> [value per round]
loads = defaultdict(list)  # peer -> [report]


def kv(text):
    return dict(p.split("=", 1) for p in text.split() if "=" in p)


def report(path):
    with gzip.open(os.path.join(out, os.path.basename(path)), "rt") as f:
        return json.load(f)


def answered(step):
    """Calls/s answered without an error. `achieved_ops_per_s` counts every reply, and an
    NFS3ERR_JUKEBOX ("try again later") is a reply that did no work, answered at once: a step
    where the server refuses calls would otherwise count its refusals as its rate."""
    return (step["completed_ops"] - step.get("errors", 0)) / (step["elapsed_ns"] / 1e9)


def knee(rep):
    """Highest offered rate achieved (>= 90 %, without errors) with p99 < 10 ms; and the most
    calls/s answered without error."""
    best, most = 0.0, 0.0
    for s in rep["steps"]:
        off, ach, p99 = s["offered_ops_per_s"], answered(s), s["latency"]["p99_ns"] / 1e6
        most = max(most, ach)
        if ach >= 0.9 * off and p99 < 10 and s.get("errors", 0) == 0:
            best = max(best, off)
    return best, most


for rnd, peer, metric, data in rows:
    if metric.startswith("iops-"):
        d = kv(data)
        ops = int(d["ops"])
        vals[(peer, metric)].append(float(d["iops"]))
        vals[(peer, metric + "-server-us")].append(int(d["server_ticks"]) / hz * 1e6 / max(ops, 1))
        vals[(peer, metric + "-cluster-us")].append(int(d["cluster_ticks"]) / hz * 1e6 / max(ops, 1))
    elif metric.startswith("stream-"):
        d = kv(data)
        if d.get("mbps"):
            vals[(peer, metric)].append(float(d["mbps"]))
        if d.get("mbps_with_sync"):
            vals[(peer, metric + "-sync")].append(float(d["mbps_with_sync"]))
    elif metric == "load":
        try:
            rep = report(data)
        except OSError:
            continue
        loads[peer].append(rep)
        k, most = knee(rep)
        vals[(peer, "knee")].append(k)
        vals[(peer, "max-achieved")].append(most)
        first = rep["steps"][0]
        # How late the generator itself sent at 1,000 calls/s: when this is near 10 ms, the
        # machine (not the server) decides every p99 of the ramp.
        vals[(peer, "first-lag-p99")].append(first["send_lag"]["p99_ns"] / 1e6)
        vals[(peer, "first-svc-p99")].append(first["service_latency"]["p99_ns"] / 1e6)
    elif metric.startswith("small-"):
        try:
            rep = report(data)
        except OSError:
            continue
        s = rep["steps"][0]
        vals[(peer, metric)].append(answered(s))
        vals[(peer, metric + "-errors")].append(s.get("errors", 0))
    elif metric in ("untar", "cat", "rm"):
        vals[(peer, metric)].append(float(kv(data)["seconds"]))


def med(peer, metric):
    v = vals.get((peer, metric))
    return statistics.median(v) if v else None


def fmt(x, unit=""):
    if x is None:
        return "–"
    if abs(x) >= 100:
        return f"{x:,.0f}{unit}"
    return f"{x:.2f}{unit}" if abs(x) < 10 else f"{x:.1f}{unit}"


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "–"


n_rounds = len({r[0] for r in rows})
print(f"Medians of {n_rounds} rounds (peers alternating); clients on CPU 0, the NFS server on CPU 1, every Ceph daemon free to use both CPUs (the same for every peer).\n")

print("## Call rate (SPEC SFS 3.0 mix, 32 clients, ramp to saturation)\n")
print("| | eagernfs | ganesha | ganesha-tuned | eagernfs / ganesha | eagernfs / ganesha-tuned |")
print("|---|---:|---:|---:|---:|---:|")
def fmt_knee(x):
    # 0: not even the first step (1,000 calls/s offered) kept p99 under 10 ms.
    return "< 1,000" if x == 0 else fmt(x)


for m, label in [("knee", "knee: highest offered calls/s achieved with p99 < 10 ms"),
                 ("max-achieved", "most calls/s answered (errors not counted)")]:
    e, g, t = med("eagernfs", m), med("ganesha", m), med("ganesha-tuned", m)
    f = fmt_knee if m == "knee" else fmt
    print(f"| {label} | {f(e)} | {f(g)} | {f(t)} | {ratio(e, g)} | {ratio(e, t)} |")
for m, label in [("first-svc-p99", "p99 from each call's actual send, at 1,000 calls/s (ms)"),
                 ("first-lag-p99", "the generator's own send lag p99 at 1,000 calls/s (ms; time the client was late, not the server)")]:
    e, g, t = med("eagernfs", m), med("ganesha", m), med("ganesha-tuned", m)
    print(f"| {label} | {fmt(e)} | {fmt(g)} | {fmt(t)} | | |")

if vals.get(("eagernfs-async", "knee")):
    print("\nThe same with eagernfs's export `async` (CREATE, REMOVE, SETATTR answered at the MDS's early "
          "reply, as ganesha answers them, not after its journal write):\n")
    print("| | eagernfs | eagernfs-async | ganesha | eagernfs-async / ganesha | eagernfs / eagernfs-async |")
    print("|---|---:|---:|---:|---:|---:|")
    for m, label in [("knee", "knee (calls/s, p99 < 10 ms)"), ("max-achieved", "most calls/s answered")]:
        e, a, g = med("eagernfs", m), med("eagernfs-async", m), med("ganesha", m)
        f = fmt_knee if m == "knee" else fmt
        print(f"| {label} | {f(e)} | {f(a)} | {f(g)} | {ratio(a, g)} | {ratio(e, a)} |")

print("\n## 8 KiB random I/O (libnfs nfsiops; native: libcephfs threads), "
      f"{seconds} s per cell, 128 MiB file\n")
print("| workload | eagernfs | ganesha | ganesha-tuned | native | eagernfs / ganesha | eagernfs / ganesha-tuned | eagernfs / native |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for mode in ["read", "write"]:
    for qd in [1, 16]:
        m = f"iops-{mode}-qd{qd}"
        e, g, t, n = (med(p, m) for p in PEERS)
        print(f"| {mode.upper()} QD{qd} IOPS | {fmt(e)} | {fmt(g)} | {fmt(t)} | {fmt(n)} | {ratio(e, g)} | {ratio(e, t)} | {ratio(e, n)} |")
print("\nCPU time per operation (µs): the NFS server process, and the Ceph daemons together (the native client's own CPU is not counted).\n")
print("| workload | server eagernfs | server ganesha | server ganesha-tuned | cluster eagernfs | cluster ganesha | cluster ganesha-tuned | cluster native |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for mode in ["read", "write"]:
    for qd in [1, 16]:
        m = f"iops-{mode}-qd{qd}"
        srv = " | ".join(fmt(med(p, m + "-server-us")) for p in PEERS[:3])
        clu = " | ".join(fmt(med(p, m + "-cluster-us")) for p in PEERS)
        print(f"| {mode.upper()} QD{qd} | {srv} | {clu} |")

print(f"\n## 1 MiB streams, 8 in flight, {stream_mib} MiB (MB/s)\n")
print("| | eagernfs | ganesha | ganesha-tuned | native | eagernfs / ganesha | eagernfs / ganesha-tuned | eagernfs / native |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for m, label in [("stream-write", "WRITE to the last reply"), ("stream-write-sync", "WRITE with COMMIT (native: fsync)"),
                 ("stream-read", "READ (after the write, same server or mount)")]:
    e, g, t, n = (med(p, m) for p in PEERS)
    print(f"| {label} | {fmt(e)} | {fmt(g)} | {fmt(t)} | {fmt(n)} | {ratio(e, g)} | {ratio(e, t)} | {ratio(e, n)} |")

print("\n## Small files (`bench load`, one-procedure mix, closed loop, 16 clients × 8 in flight; "
      "calls/s answered without error, errors: calls per run answered with an error)\n")
print("| | eagernfs | ganesha | ganesha-tuned | eagernfs / ganesha | eagernfs / ganesha-tuned | errors (e / g / t) |")
print("|---|---:|---:|---:|---:|---:|---:|")
for m, label in [("small-CREATE", "CREATE"), ("small-READ", "READ (16 KiB files, 8 KiB reads)")]:
    e, g, t = (med(p, m) for p in PEERS[:3])
    errs = " / ".join(f"{med(p, m + '-errors'):,.0f}" if med(p, m + "-errors") is not None else "–" for p in PEERS[:3])
    print(f"| {label} | {fmt(e)} | {fmt(g)} | {fmt(t)} | {ratio(e, g)} | {ratio(e, t)} | {errs} |")

print("\n## A tree of 2,000 files (1-32 KiB, 50 directories) through `eagernfs mount` (native: ceph-fuse); seconds, lower is better\n")
print("| step | eagernfs | ganesha | ganesha-tuned | native (ceph-fuse) | ganesha / eagernfs | ganesha-tuned / eagernfs | native / eagernfs |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for m, label in [("untar", "tar xf"), ("cat", "cat every file (fresh mount)"), ("rm", "rm -r")]:
    e, g, t, n = (med(p, m) for p in PEERS)
    print(f"| {label} | {fmt(e)} | {fmt(g)} | {fmt(t)} | {fmt(n)} | {ratio(g, e)} | {ratio(t, e)} | {ratio(n, e)} |")


# ---------------------------------------------------------------- plots (plain SVG)

def bars_svg(path, groups):
    """groups: [(label, [(series, value)])] -> a horizontal bar chart of ratios."""
    colors = {"eagernfs / ganesha": "#1f77b4", "eagernfs / ganesha-tuned": "#2ca02c", "eagernfs / native": "#ff7f0e"}
    h = 60 + sum(12 * len(g[1]) + 14 for g in groups)
    w, left, scale = 760, 260, 160
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
         f'<rect width="{w}" height="{h}" fill="white"/>']
    y = 24
    o.append(f'<text x="{left}" y="14">ratio (1.0 = the same; right of the line: eagernfs ahead)</text>')
    for label, series in groups:
        o.append(f'<text x="{left - 6}" y="{y + 9}" text-anchor="end">{label}</text>')
        for name, v in series:
            if not v:
                y += 12
                continue
            o.append(f'<rect x="{left}" y="{y}" width="{min(v, 3.2) * scale:.1f}" height="10" fill="{colors[name]}"/>')
            o.append(f'<text x="{left + min(v, 3.2) * scale + 4:.1f}" y="{y + 9}">{v:.2f}</text>')
            y += 12
        y += 14
    o.append(f'<line x1="{left + scale}" y1="20" x2="{left + scale}" y2="{h - 4}" stroke="black" stroke-dasharray="3,3"/>')
    lx = w - 190
    for i, (name, c) in enumerate(colors.items()):
        o.append(f'<rect x="{lx}" y="{h - 40 + i * 16}" width="10" height="10" fill="{c}"/>')
        o.append(f'<text x="{lx + 14}" y="{h - 31 + i * 16}">{name}</text>')
    o.append("</svg>")
    open(path, "w").write("\n".join(o))


def r(a, b):
    return a / b if a and b else None


def series(m, native=True, inverse=False):
    """The ratio bars of one workload (inverse: a time, lower is better)."""
    out = []
    for p in ["ganesha", "ganesha-tuned"] + (["native"] if native else []):
        a, b = med("eagernfs", m), med(p, m)
        out.append((f"eagernfs / {p}", r(b, a) if inverse else r(a, b)))
    return out


groups = [("call-rate knee", series("knee", native=False))]
for mode in ["read", "write"]:
    for qd in [1, 16]:
        groups.append((f"8 KiB {mode.upper()} QD{qd} IOPS", series(f"iops-{mode}-qd{qd}")))
for m, label in [("stream-write-sync", "1 MiB WRITE+COMMIT"), ("stream-read", "1 MiB READ")]:
    groups.append((label, series(m)))
for m, label in [("small-CREATE", "small-file CREATE"), ("small-READ", "small-file READ")]:
    groups.append((label, series(m, native=False)))
for m, label in [("untar", "tar xf (time⁻¹)"), ("cat", "cat (time⁻¹)"), ("rm", "rm -r (time⁻¹)")]:
    groups.append((label, series(m, inverse=True)))
bars_svg(os.path.join(out, "ratios.svg"), groups)


def callrate_svg(path):
    w, h, left, bottom = 700, 380, 70, 40
    pts = {p: [] for p in ("eagernfs", "ganesha", "ganesha-tuned")}
    for p in pts:
        for rep in loads.get(p, []):
            for s in rep["steps"]:
                pts[p].append((answered(s), s["latency"]["p99_ns"] / 1e6))
    allx = [x for v in pts.values() for x, _ in v] or [1]
    xmax = max(allx) * 1.05
    ymax = 100.0  # ms, log scale from 0.1
    import math

    def X(x):
        return left + (w - left - 20) * x / xmax

    def Y(y):
        y = min(max(y, 0.1), ymax)
        return (h - bottom) - (h - bottom - 20) * (math.log10(y) + 1) / (math.log10(ymax) + 1)

    colors = {"eagernfs": "#1f77b4", "ganesha": "#d62728", "ganesha-tuned": "#2ca02c"}
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<line x1="{left}" y1="{h - bottom}" x2="{w - 20}" y2="{h - bottom}" stroke="black"/>',
         f'<line x1="{left}" y1="20" x2="{left}" y2="{h - bottom}" stroke="black"/>',
         f'<text x="{(w + left) / 2}" y="{h - 8}" text-anchor="middle">achieved calls/s (SFS mix, every step of every round)</text>',
         f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle">p99 latency (ms, log)</text>']
    for y in [0.1, 1, 10, 100]:
        o.append(f'<text x="{left - 6}" y="{Y(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
        o.append(f'<line x1="{left}" y1="{Y(y):.1f}" x2="{w - 20}" y2="{Y(y):.1f}" stroke="#ddd"/>')
    for i in range(6):
        x = xmax * i / 5
        o.append(f'<text x="{X(x):.1f}" y="{h - bottom + 14}" text-anchor="middle">{x / 1000:.0f}k</text>')
    o.append(f'<line x1="{left}" y1="{Y(10):.1f}" x2="{w - 20}" y2="{Y(10):.1f}" stroke="black" stroke-dasharray="4,3"/>')
    for p, v in pts.items():
        for x, y in v:
            o.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{colors[p]}" fill-opacity="0.7"/>')
    for i, (p, c) in enumerate(colors.items()):
        o.append(f'<circle cx="{left + 20}" cy="{30 + i * 16}" r="4" fill="{c}"/>')
        o.append(f'<text x="{left + 30}" y="{34 + i * 16}">{NAMES[p]}</text>')
    o.append("</svg>")
    open(path, "w").write("\n".join(o))


callrate_svg(os.path.join(out, "callrate.svg"))
print("\nPlots: [ratios.svg](ratios.svg), [callrate.svg](callrate.svg).")
