# summ.py mount-cpu.txt: medians (and ranges) of the daemon's CPU per call per step, by binary and version.
import sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    t = l.split()
    if not l.startswith("round") or len(t) < 13:
        continue
    _, r, name, v, step = t[:5]
    kv = dict(zip(t[5::2], t[6::2]))
    d[(step, v, name)].append((float(kv["us_per_call"]), int(kv["calls"]), float(kv["cpu_ms"]), float(kv["secs"])))
names = sorted({k[2] for k in d}, reverse=True)  # before, after
print("| step | version | calls | " + " | ".join(f"{n} µs/call (range)" for n in names) + " | after / before |")
print("|---|---|---:|" + "---:|" * len(names) + "---:|")
for step in ["untar", "find", "rm-r"]:
    for v in ["v3", "v4.2"]:
        meds = {}
        cells = []
        for n in names:
            xs = d.get((step, v, n), [])
            if not xs:
                cells.append("-"); continue
            us = [x[0] for x in xs]
            meds[n] = st.median(us)
            cells.append(f"{meds[n]:.1f} ({min(us):.1f}–{max(us):.1f})")
        calls = st.median(x[1] for n in names for x in d.get((step, v, n), []))
        ratio = f"{meds['after'] / meds['before']:.2f}×" if "after" in meds and "before" in meds else "-"
        print(f"| {step} | {v} | {calls:.0f} | " + " | ".join(cells) + f" | {ratio} |")
print()
print("v4.2 / v3 per call, medians:")
for step in ["untar", "find", "rm-r"]:
    print(step, " ".join(f"{n} {st.median(x[0] for x in d[(step,'v4.2',n)]) / st.median(x[0] for x in d[(step,'v3',n)]):.2f}x" for n in names))
print()
print("seconds, medians:")
for step in ["untar", "find", "rm-r"]:
    for v in ["v3", "v4.2"]:
        print(step, v, " ".join(f"{n} {st.median(x[3] for x in d[(step, v, n)]):.2f}" for n in names))
