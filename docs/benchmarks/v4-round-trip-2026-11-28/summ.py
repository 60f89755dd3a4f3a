import sys, statistics as st, collections
d=collections.defaultdict(list); cs=collections.defaultdict(list)
for l in open(sys.argv[1]):
    t=l.split()
    if not l.startswith('round') or len(t)<12: continue
    name,op,v,mode=t[2],t[3],t[4],t[5]
    k=(op,mode,v,name); d[k].append(float(t[9])); cs[k].append((float(t[13]),float(t[15]),float(t[17])))
names=[]
for k in d:
    if k[3] not in names: names.append(k[3])
print("| call | mode | " + " | ".join(f"{n} v3 | {n} v4.2 | {n} v4.2/v3" for n in names) + " |")
for op in ["getattr","readdir"]:
    for mode in ["task","inline"]:
        row=[]
        for n in names:
            a=st.median(d[(op,mode,"v3",n)]); b=st.median(d[(op,mode,"v4.2",n)])
            row += [f"{a:.1f}", f"{b:.1f}", f"{b/a:.2f}x"]
        print(f"| {op} | {mode} | " + " | ".join(row) + " |")
print()
print("context switches per call (client voluntary, client involuntary, server), medians:")
for k in sorted(cs):
    v=[st.median(x[i] for x in cs[k]) for i in range(3)]
    print(k, v)
