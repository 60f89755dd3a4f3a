#!/usr/bin/env python3
"""summ.py RAW: medians over rounds of rtt.sh's lines, per call kind, version and binary:
us per call (the client's median) and the server's CPU us per call; ratios v4.2/v3 and after/before."""
import statistics, sys
from collections import defaultdict

lat, cpu = defaultdict(list), defaultdict(list)
names = []
for line in open(sys.argv[1]):
    w = line.split()
    if len(w) < 4 or w[0] != "round":
        continue
    name, step, vers = w[2], w[3], w[4]
    kv = dict(zip(w[6::2], w[7::2]))
    if name not in names:
        names.append(name)
    lat[step, vers, name].append(float(kv["median_us"]))
    cpu[step, vers, name].append(float(kv["srv_cpu_us_per_call"]))
med = lambda d, k: statistics.median(d[k]) if d[k] else float("nan")
a, b = names[0], names[-1]
print(f"| call | {a} v3 | {a} v4.2 | v4.2 / v3 | {b} v3 | {b} v4.2 | v4.2 / v3 | {b} v4.2 / {a} v4.2 |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for step in ["getattr", "readdir", "create", "write", "remove"]:
    for what, d in [("µs per call", lat), ("server CPU µs per call", cpu)]:
        x = [med(d, (step, v, n)) for n in (a, b) for v in ("v3", "v4.2")]
        print(f"| {step}: {what} | {x[0]:.1f} | {x[1]:.1f} | {x[1]/x[0]:.2f}× | {x[2]:.1f} | {x[3]:.1f} | "
              f"{x[3]/x[2]:.2f}× | {x[3]/x[1]:.2f}× |")
print()
print("rounds:", {k: len(v) for k, v in list(lat.items())[:1]})
