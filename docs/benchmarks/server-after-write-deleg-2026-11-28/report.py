#!/usr/bin/env python3
"""Tables of ab.sh's runs: python3 report.py OUT iops|nfs4 > table-KIND.md

iops: medians and ranges over the rounds of each binary's IOPS and server CPU per operation
(from each run's table.md), and ganesha's in the same runs (a control for the machine).
nfs4: the rounds' load reports (OUT/nfs4-rN/TARGET-r1.json.gz) per target: knee, saturation,
p50/p99 at each offered rate, medians and ranges."""
import glob, gzip, json, os, re, statistics, sys

out, kind = sys.argv[1], sys.argv[2]
med = statistics.median


def rng(xs, fmt="{:,.0f}"):
    return f"{fmt.format(min(xs))}–{fmt.format(max(xs))}"


if kind == "iops":
    data = {}  # (label, workload) -> list of (eagernfs iops, ganesha iops, e cpu, g cpu)
    for t in sorted(glob.glob(os.path.join(out, "iops-*-r*/table.md"))):
        m = re.match(r"iops-(\w+)-r(\d+)", os.path.basename(os.path.dirname(t)))
        label, rnd = m.group(1), int(m.group(2))
        for line in open(t):
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            if len(c) == 7 and c[0][:4] in ("READ", "WRIT"):
                data.setdefault((label, c[0]), []).append((float(c[1]), float(c[2]), float(c[4]), float(c[5]), rnd))
    n = len(data.get(("before", "READ QD1"), []))
    print(f"8 KiB random I/O from libnfs (nfsiops), 10 s per cell, {n} runs per binary; medians (range).\n")
    print("| workload | before IOPS | after IOPS | after / before | before CPU µs/op | after CPU µs/op | after / before | ganesha IOPS in before's runs | in after's runs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for w in ["READ QD1", "READ QD16", "WRITE QD1", "WRITE QD16"]:
        b, a = data.get(("before", w)), data.get(("after", w))
        if not b or not a:
            continue
        bi, ai = [x[0] for x in b], [x[0] for x in a]
        bc, ac = [x[2] for x in b], [x[2] for x in a]
        bg, ag = [x[1] for x in b], [x[1] for x in a]
        print(f"| {w} | {med(bi):,.0f} ({rng(bi)}) | {med(ai):,.0f} ({rng(ai)}) | {med(ai) / med(bi):.2f} "
              f"| {med(bc):.1f} ({rng(bc, '{:.1f}')}) | {med(ac):.1f} ({rng(ac, '{:.1f}')}) | {med(ac) / med(bc):.2f} "
              f"| {med(bg):,.0f} ({rng(bg)}) | {med(ag):,.0f} ({rng(ag)}) |")
    print("\nPaired by round (after / before of the same round), IOPS and CPU per operation; "
          "and the same for ganesha (the same server in both runs of a round: the pair's noise).\n")
    print("| workload | IOPS after / before per round | median | CPU/op after / before per round | median | ganesha, after's run / before's run | median |")
    print("|---|---|---:|---|---:|---|---:|")
    for w in ["READ QD1", "READ QD16", "WRITE QD1", "WRITE QD16"]:
        b = {x[4]: x for x in data.get(("before", w), [])}
        a = {x[4]: x for x in data.get(("after", w), [])}
        rs = sorted(set(a) & set(b))
        if not rs:
            continue
        ri = [a[r][0] / b[r][0] for r in rs]
        rc = [a[r][2] / b[r][2] for r in rs]
        rg = [a[r][1] / b[r][1] for r in rs]
        f = lambda xs: " / ".join(f"{x:.2f}" for x in xs)
        print(f"| {w} | {f(ri)} | {med(ri):.2f} | {f(rc)} | {med(rc):.2f} | {f(rg)} | {med(rg):.2f} |")
else:
    names = ["before-v3", "eagernfs-v3", "before-v41", "eagernfs-v41"]
    label = {"before-v3": "before NFSv3", "eagernfs-v3": "after NFSv3",
             "before-v41": "before NFSv4.1", "eagernfs-v41": "after NFSv4.1"}
    knee, sat, steps = {}, {}, {}
    for d in sorted(glob.glob(os.path.join(out, "nfs4-r*"))):
        for n in names:
            p = os.path.join(d, f"{n}-r1.json.gz")
            if not os.path.exists(p):
                continue
            r = json.load(gzip.open(p))
            k = 0
            for s in r["steps"]:
                off, ach = s["offered_ops_per_s"] or 0, s["achieved_ops_per_s"] or 0
                lat = s.get("latency") or {}
                p99 = lat.get("p99_ns", 0) / 1e6
                steps.setdefault((n, round(off)), []).append((ach, lat.get("p50_ns", 0) / 1e3, p99, s["errors"]))
                if ach >= 0.95 * off and p99 < 10 and s["errors"] == 0:
                    k = max(k, off)
            knee.setdefault(n, []).append(k)
            sat.setdefault(n, []).append(max((s["achieved_ops_per_s"] or 0) for s in r["steps"]))
    rounds = len(knee.get("before-v3", []))
    print(f"SFS mix (`bench load`, 64 clients, 5 s per rate), {rounds} rounds; medians (range).\n")
    print("| target | knee (p99 < 10 ms) per round | median knee | saturation (most achieved/s) | median saturation |")
    print("|---|---|---:|---|---:|")
    for n in names:
        if n in knee:
            print(f"| {label[n]} | {' / '.join(f'{x:,.0f}' for x in knee[n])} | {med(knee[n]):,.0f} "
                  f"| {' / '.join(f'{x:,.0f}' for x in sat[n])} | {med(sat[n]):,.0f} |")
    print()
    for v in ["v3", "v41"]:
        a, b = f"eagernfs-{v}", f"before-{v}"
        if a in knee and b in knee:
            kr = f"{med(knee[a]) / med(knee[b]):.2f}" if med(knee[b]) else "n/a"
            pairs = " / ".join(f"{x / y:.2f}" for x, y in zip(sat[a], sat[b]))
            print(f"- {label[a]} / {label[b]}: knee {kr}, saturation {med(sat[a]) / med(sat[b]):.2f} "
                  f"(per round, same run: {pairs})")
    print("\nPer offered rate: achieved calls/s, p50 µs, p99 ms (medians of the rounds; p99 range).\n")
    print("| offered/s | " + " | ".join(label[n] for n in names) + " | after / before p50 v3, v4.1 |")
    print("|---" * (len(names) + 2) + "|")
    for rate in sorted({r for (_, r) in steps}):
        cells, p50 = [], {}
        for n in names:
            xs = steps.get((n, rate))
            if not xs:
                cells.append("-")
                continue
            p50[n] = med(x[1] for x in xs)
            errs = sum(x[3] for x in xs)
            cells.append(f"{med(x[0] for x in xs):,.0f}, {p50[n]:,.0f} µs, {med(x[2] for x in xs):.2f} ms "
                         f"({rng([x[2] for x in xs], '{:.2f}')}){f' err {errs}' if errs else ''}")
        ratios = ", ".join(f"{p50[f'eagernfs-{v}'] / p50[f'before-{v}']:.2f}" if p50.get(f'before-{v}') and f'eagernfs-{v}' in p50 else "-"
                           for v in ["v3", "v41"])
        print(f"| {rate:,} | " + " | ".join(cells) + f" | {ratios} |")
