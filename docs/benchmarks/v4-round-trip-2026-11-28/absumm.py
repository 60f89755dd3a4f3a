import sys, statistics as st, collections
for f in sys.argv[1:]:
    b=None; d=collections.defaultdict(lambda: collections.defaultdict(list)); ratios=collections.defaultdict(list)
    last={}
    for l in open(f):
        if l.startswith('=='): b=l.split()[1].split('-')[-1]+' '+l.split()[2]; continue
        t=l.split()
        if t and t[0]=='round':
            v=t[2]; s=float(t[4]); d[b][v].append(s)
            if v=='v3': last[b]=s
            else: ratios[b].append(s/last[b])
    print(f)
    for b in d:
        print(f"  {b}: v3 median {st.median(d[b]['v3']):.3f} s, v4 median {st.median(d[b]['v4']):.3f} s, v4/v3 of medians {st.median(d[b]['v4'])/st.median(d[b]['v3']):.2f}x, per-round ratios median {st.median(ratios[b]):.2f}x ({min(ratios[b]):.2f}-{max(ratios[b]):.2f}), n={len(ratios[b])}")
