#!/usr/bin/env bash
# Lever & Honeyman's sequential write benchmark through the FUSE mount: `eagernfs bench write`
# (8 KiB write() calls into a fresh file, then fsync and close) on
#   local          a local directory on the same disk as the exports (the baseline)
#   fuse-eagernfs  `eagernfs mount` (default options) of eagernfs serving a directory
#   fuse-ganesha   `eagernfs mount` (default options) of nfs-ganesha (FSAL VFS) serving a directory
# each at two sizes: SIZE (default 256 MiB) and the paper's 40 MB per-call run (Fig. 2).
# The benchmark and the FUSE daemon (the whole client side) are pinned to CPU 0, the server
# to CPU 1. Targets run one after the other; each server is started and mounted only for its
# own runs, so nothing else competes.
#
#   scripts/bench-fuse-write.sh [--out DIR] [--size SIZE] [--calls-size SIZE] [--block SIZE]
#                               [--targets "local eagernfs ganesha"] [--base DIR]
#                               [--eagernfs PATH] [--max-seconds S] [--mount-options OPTS]
#
#   --out DIR          where everything goes        (default docs/benchmarks/cp-and-fuse-YYYY-MM-DD)
#   --size SIZE        the large run's file size                        (default 256MiB)
#   --calls-size SIZE  the per-call run's file size                     (default 40MB)
#   --block SIZE       bytes per write()                                (default 8KiB)
#   --targets LIST     which of local, eagernfs, ganesha                (default all three)
#   --base DIR         local directory, exports and mount points        (default /var/tmp/eagernfs-fuse-bench)
#   --eagernfs PATH    the binary (default: cargo build --release, target/release/eagernfs)
#   --max-seconds S    bound on each run's write loop                   (default 300)
#   --mount-options O  `eagernfs mount -o O` for both FUSE mounts       (default: none, the defaults)
#
# Writes to DIR: fuse-write-<target>-<size>.json.gz (the reports, per-call latencies kept,
# gzip-compressed: they are most of the bytes; `zcat F | jq .` reads one),
# fuse-write-table.md, fuse-write-summary.txt (the benchmark's own summaries),
# fuse-write-histogram-<size>.{svg,png} (all targets on one chart),
# fuse-write-latency-<size>-<n>.{svg,png} (latency per call, one per target, in --targets
# order) and fuse-write-latency-<size>.png (those stacked into one image),
# fuse-write-commands.md (every command as run) and machine.md.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/cp-and-fuse-$(date +%Y-%m-%d)
size=256MiB
calls_size=40MB
block=8KiB
targets="local eagernfs ganesha"
base=/var/tmp/eagernfs-fuse-bench
bin=""
max_seconds=300
mount_options=""
orig_args=("$@")

while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --calls-size) calls_size=$2; shift 2 ;;
        --block) block=$2; shift 2 ;;
        --targets) targets=$2; shift 2 ;;
        --base) base=$2; shift 2 ;;
        --eagernfs) bin=$2; shift 2 ;;
        --max-seconds) max_seconds=$2; shift 2 ;;
        --mount-options) mount_options=$2; shift 2 ;;
        -h | --help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-fuse-write: unknown argument $1" >&2; exit 2 ;;
    esac
done
for target in $targets; do
    case "$target" in
        local | eagernfs | ganesha) ;;
        *) echo "bench-fuse-write: unknown target $target (local, eagernfs or ganesha)" >&2; exit 2 ;;
    esac
done
[ -n "${targets// /}" ] || { echo "bench-fuse-write: --targets is empty" >&2; exit 2; }

log() { echo "bench-fuse-write: $*" >&2; }

if [ "$(nproc)" -ge 2 ]; then
    client_pin=(taskset -c 0)
    server_pin=(taskset -c 1)
    pinning="benchmark and FUSE daemon on CPU 0, server on CPU 1"
else
    client_pin=()
    server_pin=()
    pinning="not pinned (only one CPU)"
fi

"$repo/scripts/install-deps.sh" >&2
if [ -z "$bin" ]; then
    log "building eagernfs (release)"
    (cd "$repo" && cargo build --release -p eagernfs >&2)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
    built_here=1
fi
# Which eagernfs the numbers belong to: the commit a build made here came from (and whether
# the tree had uncommitted changes), or the given binary's path, date and checksum.
eagernfs_provenance() {
    if [ -n "${built_here:-}" ]; then
        echo "eagernfs built here from $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')$(
            [ -z "$(git -C "$repo" status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null)" ] ||
                echo ' + uncommitted changes')"
    elif [ -n "${bin}" ]; then
        echo "eagernfs binary ${bin} (built $(date -r "${bin}" '+%F %T'), sha256 $(sha256sum "${bin}" | cut -c1-12))"
    fi
}
mkdir -p "$base" "$out"
base=$(realpath "$base")
out=$(realpath "$out")
commands=$out/fuse-write-commands.md
summary=$out/fuse-write-summary.txt
: >"$summary"
{
    echo "# bench-fuse-write: commands as run"
    echo
    echo '```sh'
    printf '%q ' scripts/bench-fuse-write.sh "${orig_args[@]}"
    echo
    echo '```'
    echo
    echo "Every command it ran, in order (ports are picked per run):"
    echo
    echo '```sh'
} >"$commands"

# Runs a command after logging it to stderr and to the commands file, exactly as run.
run() {
    local line
    line=$(printf '%q ' "$@")
    log "running: $line"
    echo "$line" >>"$commands"
    "$@"
}

eagernfs_pid=""
mounted=""
ganesha_run=$base/ganesha-run
cleanup() {
    if [ -n "$mounted" ]; then
        "$bin" umount "$mounted" 2>/dev/null || "$bin" umount -z "$mounted" 2>/dev/null || true
    fi
    if [ -n "$eagernfs_pid" ] && kill -0 "$eagernfs_pid" 2>/dev/null; then
        kill -TERM "$eagernfs_pid" 2>/dev/null || true
        wait "$eagernfs_pid" 2>/dev/null || true
    fi
    GANESHA_RUN_DIR=$ganesha_run "$repo/scripts/ganesha.sh" stop 2>/dev/null || true
    rm -rf "$base/local" "$base/export-eagernfs" "$base/export-ganesha" "$base/eagernfs-state"
    rmdir "$base/mnt-eagernfs" "$base/mnt-ganesha" 2>/dev/null || true
}
trap cleanup EXIT

caches="NOT dropped (no permission)"
drop_caches() {
    sync
    # Every run starts from the same state: no dirty pages from the previous run being written
    # back underneath it. Needs root and a writable /proc/sys.
    if echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
        caches="dropped before every run"
    fi
}

# A port nothing listens on, with nothing on the next port either (ganesha's MOUNT port).
free_port() {
    local p tries
    for tries in $(seq 1 100); do
        p=$((20000 + RANDOM % 30000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null &&
            ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + 1))") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    log "no free port found"
    return 1
}

# Starts eagernfs on CPU 1 serving $1 and sets $url to its libnfs-style URL. Not to be called
# in a subshell: $eagernfs_pid must reach cleanup.
start_eagernfs() {
    local export=$1 port deadline line
    local -a cmd=("${server_pin[@]}" "$bin" serve "$export" --listen 127.0.0.1:0
        --state-dir "$base/eagernfs-state" -o rw,no_root_squash)
    mkdir -p "$base/eagernfs-state"
    : >"$base/eagernfs.out"
    line=$(printf '%q ' "${cmd[@]}")
    log "running: $line &"
    echo "$line&" >>"$commands"
    "${cmd[@]}" >"$base/eagernfs.out" 2>"$base/eagernfs.log" &
    eagernfs_pid=$!
    deadline=$((SECONDS + 30))
    until port=$(sed -n '1s/^eagernfs: listening on 127\.0\.0\.1:\([0-9]\+\)$/\1/p' "$base/eagernfs.out") &&
        [ -n "$port" ]; do
        if ! kill -0 "$eagernfs_pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
            log "eagernfs did not start; log tail:"
            tail -5 "$base/eagernfs.log" >&2 || true
            return 1
        fi
        sleep 0.1
    done
    url="nfs://127.0.0.1${export}/?nfsport=${port}&mountport=${port}"
}

stop_eagernfs() {
    [ -n "$eagernfs_pid" ] || return 0
    kill -TERM "$eagernfs_pid" 2>/dev/null || true
    wait "$eagernfs_pid" 2>/dev/null || true
    eagernfs_pid=""
}

# One `bench write` run of TARGET into DIR at SIZE.
bench_run() {
    local target=$1 dir=$2 size=$3
    drop_caches
    run "${client_pin[@]}" "$bin" bench write "$dir" --size "$size" --block "$block" \
        --max-seconds "$max_seconds" --label "$target" --no-progress \
        --json "$out/fuse-write-$target-$size.json.gz" | tee -a "$summary" >&2
}

# Both sizes on one directory.
bench_target() {
    local target=$1 dir=$2
    bench_run "$target" "$dir" "$size"
    bench_run "$target" "$dir" "$calls_size"
}

# Mounts URL on MOUNTPOINT with the client pin (the daemon inherits it); `eagernfs mount`
# returns only when the mount is ready or has failed.
mount_fuse() {
    local url=$1 mountpoint=$2
    mkdir -p "$mountpoint"
    # NFSv3, as the earlier runs (the mount's default is NFSv4.2).
    local -a opts=(-o "vers=3${mount_options:+,$mount_options}")
    run "${client_pin[@]}" "$bin" mount "$url" "$mountpoint" "${opts[@]}" >&2
    mounted=$mountpoint
}

umount_fuse() {
    run "$bin" umount "$mounted" >&2
    mounted=""
}

labels=()
for target in $targets; do
    case "$target" in
        local)
            label=local-$(df --output=fstype "$base" | tail -1 | tr -d ' ')
            mkdir -p "$base/local"
            bench_target "$label" "$base/local"
            rm -rf "$base/local"
            ;;
        eagernfs)
            label=fuse-eagernfs
            rm -rf "$base/export-eagernfs"
            mkdir -p "$base/export-eagernfs"
            start_eagernfs "$base/export-eagernfs"
            mount_fuse "$url" "$base/mnt-eagernfs"
            bench_target "$label" "$base/mnt-eagernfs"
            umount_fuse
            stop_eagernfs
            echo "kill -TERM \$EAGERNFS_SERVER_PID" >>"$commands"
            rm -rf "$base/export-eagernfs"
            ;;
        ganesha)
            label=fuse-ganesha
            rm -rf "$base/export-ganesha"
            mkdir -p "$base/export-ganesha"
            port=$(free_port)
            # Everything ganesha.sh starts inherits the server CPU, including ganesha's threads.
            url=$(run env GANESHA_RUN_DIR="$ganesha_run" "${server_pin[@]}" \
                "$repo/scripts/ganesha.sh" start "$base/export-ganesha" "$port" vfs)
            mount_fuse "$url" "$base/mnt-ganesha"
            bench_target "$label" "$base/mnt-ganesha"
            umount_fuse
            run env GANESHA_RUN_DIR="$ganesha_run" "$repo/scripts/ganesha.sh" stop
            rm -rf "$base/export-ganesha"
            ;;
    esac
    labels+=("$label")
done

# Stacks PNGs of equal width top to bottom into OUT. Done here in a few lines of Python (zlib
# only) because ImageMagick is not a dependency of the project and the charts are all plotters'
# 8-bit RGB or RGBA, non-interlaced.
stack_pngs() {
    log "stacking $(($# - 1)) charts into $1"
    python3 - "$@" <<'PY'
import struct, sys, zlib

def read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    pos, idat, head = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    width, height, depth, colour, _, _, interlace = head
    if depth != 8 or colour not in (2, 6) or interlace:
        sys.exit(f"{path}: only 8-bit RGB/RGBA non-interlaced PNGs can be stacked")
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if kind == 1: line[i] = (line[i] + a) & 255
            elif kind == 2: line[i] = (line[i] + b) & 255
            elif kind == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, colour, rows

out, inputs = sys.argv[1], [read_png(p) for p in sys.argv[2:]]
width, colour = inputs[0][0], inputs[0][1]
if any(w != width or c != colour for w, c, _ in inputs):
    sys.exit("charts differ in width or colour type; not stacked")
rows = [r for _, _, rs in inputs for r in rs]
def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
with open(out, "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n")
    f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, len(rows), 8, colour, 0, 0, 0)))
    f.write(chunk(b"IDAT", zlib.compress(b"".join(b"\x00" + r for r in rows), 9)))
    f.write(chunk(b"IEND", b""))
PY
}

# Plots: the histogram takes every target on one chart; `bench plot --kind latency` draws one
# chart per report (-1, -2, … in --targets order), which are then stacked into one image.
for s in "$size" "$calls_size"; do
    reports=()
    for label in "${labels[@]}"; do reports+=("$out/fuse-write-$label-$s.json.gz"); done
    run "$bin" bench plot --kind histogram -o "$out/fuse-write-histogram-$s" \
        --title "write() latency, $block calls, $s file" "${reports[@]}" >&2
    run "$bin" bench plot --kind latency -o "$out/fuse-write-latency-$s" "${reports[@]}" >&2
    if [ ${#labels[@]} -ge 2 ]; then
        pngs=()
        for n in $(seq 1 ${#labels[@]}); do pngs+=("$out/fuse-write-latency-$s-$n.png"); done
        stack_pngs "$out/fuse-write-latency-$s.png" "${pngs[@]}"
    fi
done
echo '```' >>"$commands"

# The table, straight from the JSON reports.
python3 - "$out" "$size" "$calls_size" "${labels[@]}" >"$out/fuse-write-table.md" <<'PY'
import gzip, json, sys

out, sizes, labels = sys.argv[1], sys.argv[2:4], sys.argv[4:]


def dur(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.1f} µs"


def periodicity(s):
    if s["spikes"] == 0:
        return "none"
    if s["periodic"]:
        return f"**every {s['period_calls']} calls** (score {s['period_score']:.2f}, p {s['period_p_value']:.1g})"
    if s.get("period_calls"):
        return f"not periodic (best {s['period_calls']} calls, score {s['period_score']:.2f})"
    return "not periodic"


print("### bench write: 8 KiB sequential write() calls (MB = 10^6 B)")
print()
print("| target | file | MB/s after last write | after fsync | after close | mean | p50 | p99 | p99.9 | max | spikes (> 10× median) | spike period |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for size in sizes:
    for label in labels:
        report = json.load(gzip.open(f"{out}/fuse-write-{label}-{size}.json.gz"))
        run = max(report["runs"], key=lambda r: r["bytes_written"])
        lat, sp = run["latency"], run["spikes"]
        short = " (stopped early)" if run.get("stopped_early") else ""
        print(
            f"| {label} | {size}{short} | {run['mb_per_s_writes']:.1f} | {run['mb_per_s_fsync']:.1f} | "
            f"{run['mb_per_s_close']:.1f} | {dur(lat['mean_ns'])} | {dur(lat['p50_ns'])} | "
            f"{dur(lat['p99_ns'])} | {dur(lat['p999_ns'])} | {dur(lat['max_ns'])} | "
            f"{sp['spikes']} ({sp['spike_fraction'] * 100:.2f} %) | {periodicity(sp)} |"
        )
PY
cat "$out/fuse-write-table.md"
{
    echo
    if [ -n "$mount_options" ]; then
        echo "Client side: $pinning; FUSE mounts with \`eagernfs mount URL DIR -o $mount_options\`;"
    else
        echo "Client side: $pinning; FUSE mounts with \`eagernfs mount URL DIR\` and no -o (defaults);"
    fi
    echo "local directory, exports and mounts under $base ($(df --output=source,fstype "$base" | tail -1 | tr -s ' '));"
    echo "page cache $caches; $(nproc) CPUs; $(eagernfs_provenance),"
    echo "nfs-ganesha $(dpkg-query -W -f='${Version}' nfs-ganesha 2>/dev/null || echo '?') (VFS)."
} | tee -a "$out/fuse-write-table.md"

if [ ! -f "$out/machine.md" ]; then
    {
        echo "# Machine"
        echo
        echo '```'
        uname -a
        echo
        lscpu 2>/dev/null | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|CPU max MHz|L2|L3)' || true
        echo
        free -h 2>/dev/null | head -2 || true
        echo
        eagernfs_provenance
        echo "nfs-ganesha: $(dpkg-query -W -f='${Version}' nfs-ganesha 2>/dev/null || echo 'not installed')"
        echo "libnfs-utils: $(dpkg-query -W -f='${Version}' libnfs-utils 2>/dev/null || echo 'not installed')"
        echo "fuse3: $(dpkg-query -W -f='${Version}' fuse3 2>/dev/null || echo 'not installed')"
        echo "disk under $base: $(df --output=source,fstype "$base" | tail -1 | tr -s ' ')"
        echo '```'
    } >"$out/machine.md"
fi
log "results in $out"
