#!/usr/bin/env bash
# The measured floor of `cat` every file and `rm -r` through a FUSE NFS client (issue 18): what
# FUSE, one round trip and the server's system calls cost per file, measured rather than
# estimated. In the same run, pinned (workload and FUSE process on CPU 0, server on CPU 1), in
# rounds that rotate the target order, on a copy of /usr/include:
#   bindfs     bindfs over the backing directory (FUSE passthrough, no network);
#   floor0     floorfs (scripts/floorfs/floorfs.c) with no round trips: the control, ≈ bindfs;
#   floor-cto  floorfs making, synchronously on the FUSE handler thread, the round trips a
#              close-to-open NFSv3 client must make: 1 NULL call to `eagernfs serve` before
#              answering an open (the open's attribute check), 1 per read request (the READ),
#              1 per unlink and per rmdir (REMOVE, RMDIR);
#   eagernfs   `eagernfs mount` of the same kind of directory exported by `eagernfs serve`;
#   ext4       the backing directory itself, no FUSE: the system calls' own cost per file;
#   floor-1rt  floorfs with 1 NULL at open and none per read (a client whose READ goes out at
#              open and whose reply's attributes do the close-to-open check: issue 18's
#              technique 2), 1 per unlink and rmdir;
#   floor0-st, floor-cto-st  the same floorfs single-threaded (-s), as Debian 12's bindfs 1.14
#              runs by default (floorfs, like `eagernfs mount`, is multithreaded by default).
# Per round and target: untar the tree onto the target's backing directory and sync (not timed),
# mount, time `find DIR -type f -exec cat {} + >/dev/null`, time `rm -r`, unmount. Each round
# also takes `floorfs --ping` from CPU 0 (the raw NULL round trip to the server on CPU 1). The
# server's calls by procedure (`eagernfs stat --state-dir`) are taken around every step.
#
#   scripts/bench-floor.sh [--out DIR] [--rounds N] [--targets "bindfs floor0 floor-cto eagernfs ..."]
#                          [--tree DIR] [--ping-calls N]
#
# Binary: $BIN (or $EAGERNFS_BIN), else a release build of this tree. Needs root, bindfs, fuse3,
# a C compiler and libfuse3-dev (apt-get install libfuse3-dev).
# Writes DIR/results.tsv (target, round, step, value, server calls), DIR/table.md and
# DIR/command.txt. Default DIR: docs/benchmarks/floor-YYYY-MM-DD.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/floor-$(date +%Y-%m-%d)
rounds=3
targets="ext4 bindfs floor0 floor-cto floor-1rt eagernfs floor0-st floor-cto-st"
tree=/usr/include
ping_calls=20000
orig_args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --targets) targets=$2; shift 2 ;;
        --tree) tree=$2; shift 2 ;;
        --ping-calls) ping_calls=$2; shift 2 ;;
        -h | --help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
        *) echo "bench-floor: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "bench-floor: $*" >&2; }
. "$repo/scripts/lib/mounts.sh"
for t in $targets; do
    case $t in
        ext4 | bindfs | floor0 | floor-cto | floor-1rt | floor0-st | floor-cto-st | eagernfs) ;;
        *) log "unknown target $t"; exit 2 ;;
    esac
done
[[ "$rounds" =~ ^[1-9][0-9]?$ ]] || { log "--rounds wants 1..99"; exit 2; }
for tool in bindfs fusermount3 cc pkg-config taskset; do
    command -v "$tool" >/dev/null || { log "needs $tool (scripts/install-deps.sh)"; exit 1; }
done
if ! pkg-config --exists fuse3; then
    log "needs libfuse3's headers to build floorfs: apt-get install libfuse3-dev"
    exit 1
fi
bin=${BIN:-${EAGERNFS_BIN:-}}
if [ -z "$bin" ]; then
    (cd "$repo" && cargo build --release -q -p eagernfs >&2)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
fi

work=$(mktemp -d /var/tmp/eagernfs-benchfloor.XXXXXX)
chmod 755 "$work"
server_pid=
cleanup() {
    local unmounted=0
    unmount_all "$work" "$bin" && unmounted=1
    if [ -n "$server_pid" ]; then
        kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    fi
    # Never remove the work directory through a mount that is still there.
    if [ "$unmounted" = 1 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
mkdir -p "$out"

cc -O2 -Wall -o "$work/floorfs" "$repo/scripts/floorfs/floorfs.c" $(pkg-config --cflags --libs fuse3)
pack_tree "$tree" "$work"

for t in $targets; do
    mkdir -p "$work/src-$t" "$work/mnt-$t"
done
mkdir -p "$work/state"
chmod 777 "$work"/src-*
port=$((20000 + RANDOM % 20000))
# The server exports the eagernfs target's backing directory (or an empty one) and answers the
# NULL calls of floor-cto.
mkdir -p "$work/src-eagernfs"
taskset -c 1 "$bin" serve "$work/src-eagernfs" --listen "127.0.0.1:$port" --state-dir "$work/state" \
    -o rw,no_root_squash >"$work/state/server.out" 2>"$work/state/server.log" &
server_pid=$!
for _ in $(seq 1 300); do
    grep -q "listening on" "$work/state/server.out" 2>/dev/null && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/state/server.log" >&2; exit 1; }
    sleep 0.1
done
grep -q "listening on" "$work/state/server.out" || { log "server did not start in 30 s"; exit 1; }
rtt="rtt_server=127.0.0.1:$port,rtt_open=1,rtt_read=1,rtt_unlink=1,rtt_rmdir=1"
rtt1="rtt_server=127.0.0.1:$port,rtt_open=1,rtt_read=0,rtt_unlink=1,rtt_rmdir=1"

dir_of() { # target -> the directory the workload uses
    case $1 in
        ext4) echo "$work/src-ext4" ;;
        *) echo "$work/mnt-$1" ;;
    esac
}
do_mount() {
    local m=$work/mnt-$1 s=$work/src-$1
    case $1 in
        ext4) ;;
        bindfs) taskset -c 0 bindfs --no-allow-other "$s" "$m" ;;
        floor0) taskset -c 0 "$work/floorfs" "$s" "$m" ;;
        floor0-st) taskset -c 0 "$work/floorfs" "$s" "$m" -s ;;
        floor-cto) taskset -c 0 "$work/floorfs" "$s" "$m" -o "$rtt" ;;
        floor-cto-st) taskset -c 0 "$work/floorfs" "$s" "$m" -s -o "$rtt" ;;
        floor-1rt) taskset -c 0 "$work/floorfs" "$s" "$m" -o "$rtt1" ;;
        eagernfs) taskset -c 0 "$bin" mount "nfs://127.0.0.1:$port$s" "$m" -o vers=3 ;;
    esac
}
do_umount() {
    case $1 in
        ext4) ;;
        eagernfs) "$bin" umount "$work/mnt-$1" ;;
        *) fusermount3 -u "$work/mnt-$1" ;;
    esac
}
# the server's calls so far, by procedure ("NAME COUNT" lines)
server_ops() {
    "$bin" stat --state-dir "$work/state" 2>/dev/null | awk '/^[A-Z0-9_]+ +[0-9]+ /{print $1, $2}'
}

: >"$work/results.tsv"
now() { date +%s.%N; }
step() { # target round name command...
    local target=$1 round=$2 name=$3
    shift 3
    local t0 t1 ops0 ops1 calls secs
    ops0=$(server_ops)
    t0=$(now)
    taskset -c 0 "$@" >/dev/null
    t1=$(now)
    ops1=$(server_ops)
    secs=$(echo "$t1 - $t0" | bc)
    calls=$(join -a 2 -e 0 -o 0,1.2,2.2 <(echo "$ops0" | sort) <(echo "$ops1" | sort) 2>/dev/null |
        awk '$3 - $2 > 0 {printf "%s%s=%d", sep, $1, $3 - $2; sep = ","}')
    log "round $round $target $name: ${secs} s, server calls ${calls:-none}"
    echo -e "$target\t$round\t$name\t$secs\t${calls:--}" >>"$work/results.tsv"
}

run_target() { # target round
    local t=$1 r=$2 s=$work/src-$1 m top
    m=$(dir_of "$t")
    top=$(basename "$tree")
    rm -rf "${s:?}/$top"
    tar -xf "$work/tree.tar" -C "$s"
    sync -f "$s"
    do_mount "$t"
    step "$t" "$r" cat sh -c "find '$m' -type f -exec cat {} + >/dev/null"
    step "$t" "$r" rm-r rm -r "$m/$top"
    do_umount "$t"
    [ ! -e "$s/$top" ] || { log "$t: rm -r left $s/$top behind"; exit 1; }
}

read -r -a order <<<"$targets"
n=${#order[@]}
for r in $(seq 1 "$rounds"); do
    p=$(taskset -c 0 "$work/floorfs" --ping "$ping_calls" "127.0.0.1:$port")
    log "round $r ping: $p"
    echo -e "ping\t$r\tnull-rtt\t$p\t-" >>"$work/results.tsv"
    for i in $(seq 0 $((n - 1))); do
        run_target "${order[$(((i + r - 1) % n))]}" "$r"
    done
done
cp "$work/results.tsv" "$out/results.tsv"
echo "scripts/bench-floor.sh ${orig_args[*]}" >"$out/command.txt"
{
    echo "# $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) CPUs, $(uname -r), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# tree: $tree, $files files, $dirs directories; eagernfs $("$bin" --version); $(bindfs --version | head -1); libfuse3 $(pkg-config --modversion fuse3)"
    echo "# BIN=$bin"
} >>"$out/command.txt"

python3 - "$out" "$files" "$targets" <<'EOF'
import collections, statistics, sys
out, files, targets = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
secs = collections.defaultdict(list)
calls = collections.defaultdict(list)
pings = []
for line in open(f"{out}/results.tsv"):
    target, rnd, step, value, c = line.rstrip("\n").split("\t")
    if target == "ping":
        f = value.split()
        pings.append(dict(zip(f[0::2], f[1::2])))
        continue
    secs[(target, step)].append(float(value))
    calls[(target, step)].append(dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in c.split(",") if "=" in kv))
med = statistics.median
lines = [f"Seconds: median of {len(pings)} rounds (range); µs per file = median / {files} files; ratio to bindfs's median.", "",
         "| target | cat | cat µs/file | cat / bindfs | rm -r | rm -r µs/file | rm -r / bindfs |", "|---|---:|---:|---:|---:|---:|---:|"]
for t in targets:
    cells = []
    for step in ("cat", "rm-r"):
        v = secs[(t, step)]
        b = secs.get(("bindfs", step))
        cells += [f"{med(v):.2f} s ({min(v):.2f}–{max(v):.2f})", f"{med(v) / files * 1e6:.0f}",
                  f"{med(v) / med(b):.2f}×" if b else "–"]
    lines.append(f"| {t} | " + " | ".join(cells) + " |")
lines += ["", "Server calls per file (median over rounds, by procedure):", ""]
for t in targets:
    for step in ("cat", "rm-r"):
        cs = calls[(t, step)]
        names = sorted({n for c in cs for n in c})
        if names:
            total = med([sum(c.values()) for c in cs])
            parts = ", ".join(f"{n} {med([c.get(n, 0) for c in cs]) / files:.2f}" for n in names)
            lines.append(f"- {step}, {t}: {total / files:.2f} ({parts})")
p50 = [float(p["p50_us"]) for p in pings]
lines += ["", f"NULL round trip from CPU 0 to the server on CPU 1 (`floorfs --ping {pings[0]['calls']}`, each round): "
          f"p50 {', '.join(f'{x:.1f}' for x in p50)} µs; p90 {', '.join(p['p90_us'] for p in pings)} µs; "
          f"p99 {', '.join(p['p99_us'] for p in pings)} µs."]
rt = [t for t in ("floor-cto", "floor-1rt", "floor-cto-st") if (t, "cat") in secs]
if ("floor0", "cat") in secs and rt:
    lines += ["", "What the round trips add per file over the same floorfs without them (medians), and per NULL call the server saw:", ""]
    for t in rt:
        base = "floor0-st" if t.endswith("-st") else "floor0"
        if (base, "cat") not in secs:
            continue
        for step in ("cat", "rm-r"):
            d = (med(secs[(t, step)]) - med(secs[(base, step)])) / files * 1e6
            n = med([c.get("NULL", 0) for c in calls[(t, step)]]) / files
            per = f"{d / n:.1f} µs per call" if n else "–"
            lines.append(f"- {t} − {base}, {step}: {d:.0f} µs per file for {n:.2f} NULL calls per file = {per}")
if ("eagernfs", "cat") in secs and ("floor-cto", "cat") in secs:
    lines += ["", "eagernfs over its floor (floor-cto, same round trips per file):", ""]
    for step in ("cat", "rm-r"):
        e, f = med(secs[("eagernfs", step)]), med(secs[("floor-cto", step)])
        lines.append(f"- {step}: {e / f:.2f}×, {(e - f) / files * 1e6:.0f} µs per file more")
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
log "wrote $out/table.md, $out/results.tsv"
