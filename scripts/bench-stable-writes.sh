#!/usr/bin/env bash
# The FreeBSD/OpenSolaris post's experiment, and what an intent journal changes (issue 9):
# copy SIZE (default 1 GiB) sequentially in 32 KiB WRITEs
#   file-sync/1    FILE_SYNC per block, one in flight (an O_SYNC writer, a `sync` mount)
#   file-sync/16   FILE_SYNC per block, 16 in flight
#   unstable/16    UNSTABLE, 16 in flight, then one COMMIT (what a write-back client does)
# against
#   eagernfs          eagernfs serve DIR (sync export: FILE_SYNC and COMMIT fsync the file)
#   eagernfs-journal  eagernfs serve DIR --journal FILE, the journal on the export's own disk
#   eagernfs-nvram    the same with the journal on /dev/shm: a stand-in for NVRAM/Prestoserve
#                     (memory that survives a crash; tmpfs does not survive power loss, so this
#                     row shows the design's ceiling, not a safe configuration)
#   eagernfs-async    eagernfs serve DIR -o async (unsafe: acknowledges without syncing)
#   ganesha           nfs-ganesha 4.3, FSAL VFS, on the same disk
# then `bench write` through eagernfs's own client (1 GiB, 32 KiB writes) without and with a
# journal, plotting the written data the client holds over time (early laundering).
# Servers are pinned to CPU 1, clients to CPU 0.
#
#   scripts/bench-stable-writes.sh [--out DIR] [--size SIZE] [--no-ganesha]
#
# Writes DIR/table.md (MB/s and ratios), DIR/stable-writes.svg (bars), DIR/held.{svg,png},
# DIR/summary.txt (every run's summary) and DIR/command.txt. Raw reports stay in a temporary
# directory (rerun to regenerate). The binary is $EAGERNFS_BIN if set, else a release build.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/stable-writes-$(date +%Y-%m-%d)
size=1GiB
ganesha=1
orig_args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --no-ganesha) ganesha=0; shift ;;
        -h | --help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-stable-writes: unknown argument $1" >&2; exit 2 ;;
    esac
done

log() { echo "bench-stable-writes: $*" >&2; }

bin=${EAGERNFS_BIN:-}
if [ -z "$bin" ]; then
    log "building eagernfs (release)"
    (cd "$repo" && cargo build --release -q -p eagernfs >&2)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
fi

work=$(mktemp -d /var/tmp/eagernfs-stable.XXXXXX)
shm=$(mktemp -d /dev/shm/eagernfs-stable.XXXXXX)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    GANESHA_RUN_DIR=$work/ganesha "$repo/scripts/ganesha.sh" stop >/dev/null 2>&1 || true
    rm -rf "$work" "$shm"
}
trap cleanup EXIT
mkdir -p "$out" "$work/export" "$work/state" "$work/reports"
port=$((20000 + RANDOM % 20000))

start_eagernfs() { # extra serve args...
    rm -rf "$work/export"/* "$work/journal" "$shm/journal"
    taskset -c 1 "$bin" serve "$work/export" --listen "127.0.0.1:$port" --state-dir "$work/state" \
        -o "rw,no_root_squash${opts:-}" "$@" >"$work/serve.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 300); do
        grep -q "listening" "$work/serve.log" && return 0
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    cat "$work/serve.log" >&2
    log "server did not start"
    exit 1
}
stop_eagernfs() {
    kill -INT "$server_pid"
    wait "$server_pid" || true
    server_pid=
}

: >"$work/results.tsv"
run_streams() { # name url
    local name=$1 url=$2
    for mode in file-sync/1 file-sync/16 unstable/16; do
        local stable=${mode%/*} qd=${mode#*/}
        log "$name: $stable, $qd in flight"
        taskset -c 0 "$bin" bench stream "$url" --direction write --stable "$stable" --in-flight "$qd" \
            --rpc-size 32KiB --size "$size" --max-seconds 300 --no-progress --label "$name" \
            --json "$work/reports/$name-$stable-$qd.json" >"$work/run.txt" 2>&1 || { cat "$work/run.txt" >&2; exit 1; }
        cat "$work/run.txt" >>"$out/summary.txt"
        python3 - "$work/reports/$name-$stable-$qd.json" "$name" "$mode" >>"$work/results.tsv" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
mbs = r.get("mb_per_s_committed") or r.get("mb_per_s")
print(f"{sys.argv[2]}\t{sys.argv[3]}\t{mbs:.1f}\t{r['stably_answered_bytes']}\t{r['bytes']}")
EOF
    done
}

: >"$out/summary.txt"
url="nfs://127.0.0.1:$port$work/export"
opts="" start_eagernfs
run_streams eagernfs "$url"; stop_eagernfs
opts="" start_eagernfs --journal "$work/journal"
run_streams eagernfs-journal "$url"; stop_eagernfs
opts="" start_eagernfs --journal "$shm/journal"
run_streams eagernfs-nvram "$url"; stop_eagernfs
opts=",async" start_eagernfs
run_streams eagernfs-async "$url"; stop_eagernfs
if [ "$ganesha" = 1 ]; then
    rm -rf "$work/export"/*
    gurl=$(GANESHA_RUN_DIR=$work/ganesha taskset -c 1 "$repo/scripts/ganesha.sh" start "$work/export" "$((port + 2))" vfs)
    run_streams ganesha "$gurl"
    GANESHA_RUN_DIR=$work/ganesha "$repo/scripts/ganesha.sh" stop >/dev/null
fi

# Early laundering: the client's held data without and with a journal.
for j in none journal; do
    if [ $j = journal ]; then start_eagernfs --journal "$work/journal"; else opts="" start_eagernfs; fi
    log "bench write through eagernfs's client, journal: $j"
    taskset -c 0 "$bin" bench write "$url" --size "$size" --block 32KiB --no-progress \
        --label "$([ $j = journal ] && echo 'with a journal (answered FILE_SYNC)' || echo 'without (UNSTABLE until COMMIT)')" \
        --json "$work/reports/held-$j.json.gz" >>"$out/summary.txt" 2>&1
    stop_eagernfs
done
"$bin" bench plot --kind held "$work/reports/held-none.json.gz" "$work/reports/held-journal.json.gz" \
    --output "$out/held" >&2
# The SVG holds a dot per sample (~0.8 MB): keep the PNG only.
rm -f "$out/held.svg"

python3 - "$work/results.tsv" "$out" "$size" <<'EOF'
import sys, collections
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
out, size = sys.argv[2], sys.argv[3]
modes = ["file-sync/1", "file-sync/16", "unstable/16"]
names = list(dict.fromkeys(r[0] for r in rows))
mbs = {(r[0], r[1]): float(r[2]) for r in rows}
stable = {(r[0], r[1]): (int(r[3]), int(r[4])) for r in rows}
def cell(n, m):
    return f"{mbs[(n, m)]:.1f}" if (n, m) in mbs else "–"
with open(f"{out}/table.md", "w") as f:
    f.write(f"Sequential {size} in 32 KiB WRITEs; MB/s (10^6 B/s) to the last reply, after COMMIT for unstable.\n\n")
    f.write("| server | " + " | ".join(modes) + " | answered stable (unstable/16) |\n")
    f.write("|---|" + "---:|" * len(modes) + "---:|\n")
    for n in names:
        s = stable.get((n, "unstable/16"), (0, 1))
        f.write(f"| {n} | " + " | ".join(cell(n, m) for m in modes) + f" | {100 * s[0] / max(s[1], 1):.0f} % |\n")
    f.write("\nRatios, FILE_SYNC per block:\n\n| ratio | file-sync/1 | file-sync/16 |\n|---|---:|---:|\n")
    def ratio(a, b, m):
        return f"{mbs[(a, m)] / mbs[(b, m)]:.2f}" if (a, m) in mbs and (b, m) in mbs and mbs[(b, m)] else "–"
    for a, b in [("eagernfs-journal", "eagernfs-async"), ("eagernfs-nvram", "eagernfs-async"),
                 ("eagernfs", "eagernfs-async"), ("eagernfs-journal", "ganesha"),
                 ("eagernfs-nvram", "ganesha"), ("eagernfs-journal", "eagernfs")]:
        f.write(f"| {a} / {b} | {ratio(a, b, 'file-sync/1')} | {ratio(a, b, 'file-sync/16')} |\n")
# Grouped bars, one group per mode, as a dependency-free SVG.
W, H, left, bottom, top = 900, 460, 70, 60, 50
top_v = max(mbs.values()) * 1.1
colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
group_w = (W - left - 20) / len(modes)
bar_w = group_w * 0.8 / max(len(names), 1)
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="DejaVu Sans, sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{W / 2}" y="24" text-anchor="middle" font-size="16">Sequential {size}, 32 KiB WRITEs: MB/s by how WRITEs ask for durability</text>']
plot_h = H - top - bottom
for k in range(6):
    v = top_v * k / 5
    y = H - bottom - plot_h * k / 5
    svg.append(f'<line x1="{left}" x2="{W - 20}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>')
    svg.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v:.0f}</text>')
for gi, m in enumerate(modes):
    gx = left + gi * group_w + group_w * 0.1
    svg.append(f'<text x="{left + gi * group_w + group_w / 2:.1f}" y="{H - bottom + 20}" text-anchor="middle">{m.replace("/", ", ")} in flight</text>')
    for ni, n in enumerate(names):
        if (n, m) not in mbs:
            continue
        v = mbs[(n, m)]
        h = plot_h * v / top_v
        x = gx + ni * bar_w
        svg.append(f'<rect x="{x:.1f}" y="{H - bottom - h:.1f}" width="{bar_w * 0.9:.1f}" height="{h:.1f}" fill="{colours[ni % len(colours)]}"><title>{n} {m}: {v:.1f} MB/s</title></rect>')
        svg.append(f'<text x="{x + bar_w * 0.45:.1f}" y="{H - bottom - h - 4:.1f}" text-anchor="middle" font-size="10">{v:.0f}</text>')
for ni, n in enumerate(names):
    x = left + 10 + ni * 150
    svg.append(f'<rect x="{x}" y="{H - 24}" width="12" height="12" fill="{colours[ni % len(colours)]}"/><text x="{x + 16}" y="{H - 14}">{n}</text>')
svg.append(f'<text x="16" y="{top + plot_h / 2}" transform="rotate(-90 16 {top + plot_h / 2})" text-anchor="middle">MB/s</text>')
svg.append("</svg>")
open(f"{out}/stable-writes.svg", "w").write("\n".join(svg) + "\n")
EOF
{
    echo "scripts/bench-stable-writes.sh ${orig_args[*]}"
    echo "eagernfs $("$bin" --version 2>/dev/null | head -1) · $(uname -r) · $(nproc) CPUs · $(date -u +%Y-%m-%dT%H:%MZ)"
} >"$out/command.txt"
cat "$out/table.md"
log "wrote $out"
