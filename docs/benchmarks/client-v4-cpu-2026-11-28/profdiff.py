import subprocess, sys, re, collections
def prof(f, calls, key):
    out = subprocess.run(["perf","report","-i",f,"--no-children","--no-inline","--stdio","--sort",key,"-g","none","--percent-limit","0"],capture_output=True,text=True).stdout
    tot = float(re.search(r"Event count \(approx.\): (\d+)", out).group(1))
    d = collections.Counter()
    for l in out.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+(.*)$", l)
        if m: d[m.group(2).strip()] += float(m.group(1))/100*tot/1000/calls
    return tot/1000/calls, d
a_tot, a = prof(sys.argv[1], int(sys.argv[2]), sys.argv[5])
b_tot, b = prof(sys.argv[3], int(sys.argv[4]), sys.argv[5])
print(f"total us/call: A {a_tot:.1f}  B {b_tot:.1f}  diff {b_tot-a_tot:+.1f}")
keys = set(a)|set(b)
for k in sorted(keys, key=lambda k: -(b[k]-a[k]))[:int(sys.argv[6]) if len(sys.argv)>6 else 40]:
    print(f"{a[k]:7.2f} {b[k]:7.2f} {b[k]-a[k]:+7.2f}  {k[:110]}")
