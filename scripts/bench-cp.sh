#!/usr/bin/env bash
# The issue's benchmark: sequential write and read of one large file with libnfs `nfs-cp`,
# against eagernfs and nfs-ganesha (FSAL VFS) in the same run, exports on the same disk.
# The client is pinned to CPU 0 and the server to CPU 1; each measurement is repeated and the
# median reported, with eagernfs/ganesha ratios, as a Markdown table on stdout.
#
#   scripts/bench-cp.sh [--runs N] [--size-mib M] [--servers "eagernfs ganesha"]
#                       [--base DIR] [--eagernfs PATH] [--timeout-s S]
#
#   --runs N         repetitions per server and direction            (default 3)
#   --size-mib M     file size                                        (default 1024 = 1 GiB)
#   --servers LIST   which servers to measure                          (default "eagernfs ganesha")
#   --base DIR       where both exports and the source file live       (default /var/tmp/eagernfs-bench)
#   --eagernfs PATH  server binary (default: cargo build --release, target/release/eagernfs)
#   --timeout-s S    bound on any single copy; a run over it counts as failed (default 300)
#
# "Write" is nfs-cp local -> server, "read" is nfs-cp server -> a file on tmpfs (nfs-cp cannot
# write to /dev/null). Page caches are dropped before every copy when the kernel lets us, so
# reads come from the server's disk, not its memory.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
runs=3
size_mib=1024
servers="eagernfs ganesha"
base=/var/tmp/eagernfs-bench
eagernfs_bin=""
timeout_s=300

while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=$2; shift 2 ;;
        --size-mib) size_mib=$2; shift 2 ;;
        --servers) servers=$2; shift 2 ;;
        --base) base=$2; shift 2 ;;
        --eagernfs) eagernfs_bin=$2; shift 2 ;;
        --timeout-s) timeout_s=$2; shift 2 ;;
        -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-cp: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "bench-cp: --runs must be a positive integer" >&2; exit 2; }
[[ "$size_mib" =~ ^[1-9][0-9]*$ ]] || { echo "bench-cp: --size-mib must be a positive integer" >&2; exit 2; }

log() { echo "bench-cp: $*" >&2; }
size_bytes=$((size_mib * 1024 * 1024))

# Pinning needs two CPUs; on one CPU we still measure but say so.
if [ "$(nproc)" -ge 2 ]; then
    client_pin=(taskset -c 0)
    server_pin=(taskset -c 1)
    pinning="client on CPU 0, server on CPU 1"
else
    client_pin=()
    server_pin=()
    pinning="not pinned (only one CPU)"
fi

# Read destinations go to tmpfs so the local side costs as little as possible.
sink_dir=/dev/shm
[ -d "$sink_dir" ] && [ -w "$sink_dir" ] || sink_dir=$base
sink=$sink_dir/eagernfs-bench-read.$$

"$repo/scripts/install-deps.sh" >&2
mkdir -p "$base"
src=$base/source-${size_mib}MiB
if [ "$(stat -c %s "$src" 2>/dev/null || echo 0)" != "$size_bytes" ]; then
    log "creating $src ($size_mib MiB of random data)"
    head -c "$size_bytes" /dev/urandom >"$src.tmp"
    mv "$src.tmp" "$src"
fi

eagernfs_pid=""
ganesha_run=$base/ganesha-run
cleanup() {
    if [ -n "$eagernfs_pid" ] && kill -0 "$eagernfs_pid" 2>/dev/null; then
        kill -TERM "$eagernfs_pid" 2>/dev/null || true
        wait "$eagernfs_pid" 2>/dev/null || true
    fi
    GANESHA_RUN_DIR=$ganesha_run "$repo/scripts/ganesha.sh" stop 2>/dev/null || true
    rm -f "$sink"
    rm -rf "$base/export-eagernfs" "$base/export-ganesha" "$base/eagernfs-state"
}
trap cleanup EXIT

drop_caches() {
    sync
    # Needs root and a writable /proc/sys; without it the numbers include cache hits, which the
    # report says.
    if echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
        caches="dropped before every copy"
    else
        caches="NOT dropped (no permission)"
    fi
}

# A port nothing listens on: connecting to it is refused. Bounded number of tries.
free_port() {
    local p tries
    for tries in $(seq 1 100); do
        p=$((20000 + RANDOM % 30000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    log "no free port found"
    return 1
}

# Starts eagernfs pinned to the server CPU and sets $url_base. Returns 1 if it cannot start.
start_eagernfs() {
    local export=$1 out deadline port
    if [ -z "$eagernfs_bin" ]; then
        log "building eagernfs (release)"
        (cd "$repo" && cargo build --release -p eagernfs >&2) || return 1
        eagernfs_bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
    fi
    mkdir -p "$base/eagernfs-state"
    out=$base/eagernfs.out
    : >"$out"
    "${server_pin[@]}" "$eagernfs_bin" serve "$export" --listen 127.0.0.1:0 \
        --state-dir "$base/eagernfs-state" -o rw,no_root_squash >"$out" 2>"$base/eagernfs.log" &
    eagernfs_pid=$!
    deadline=$((SECONDS + 30))
    until port=$(sed -n '1s/^eagernfs: listening on 127\.0\.0\.1:\([0-9]\+\)$/\1/p' "$out") && [ -n "$port" ]; do
        if ! kill -0 "$eagernfs_pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
            log "eagernfs did not start; log tail:"
            tail -5 "$base/eagernfs.log" >&2 || true
            kill "$eagernfs_pid" 2>/dev/null || true
            eagernfs_pid=""
            return 1
        fi
        sleep 0.1
    done
    url_base="nfs://127.0.0.1${export}"
    url_query="?nfsport=${port}&mountport=${port}"
}

stop_eagernfs() {
    [ -n "$eagernfs_pid" ] || return 0
    kill -TERM "$eagernfs_pid" 2>/dev/null || true
    wait "$eagernfs_pid" 2>/dev/null || true
    eagernfs_pid=""
}

start_ganesha() {
    local export=$1 port url
    port=$(free_port)
    # Everything ganesha.sh starts inherits the server CPU, including ganesha's threads.
    url=$(GANESHA_RUN_DIR=$ganesha_run GANESHA_MNT_PORT=$(free_port) \
        "${server_pin[@]}" "$repo/scripts/ganesha.sh" start "$export" "$port" vfs) || return 1
    url_base="nfs://127.0.0.1${export}"
    url_query="?${url#*\?}"
}

stop_ganesha() {
    GANESHA_RUN_DIR=$ganesha_run "$repo/scripts/ganesha.sh" stop
}

# Times one bounded nfs-cp; prints MB/s (10^6 bytes per second) or "fail".
timed_copy() {
    local from=$1 to=$2 t0 t1
    drop_caches
    t0=$(date +%s.%N)
    if ! timeout "$timeout_s" "${client_pin[@]}" nfs-cp "$from" "$to" >/dev/null 2>"$base/nfs-cp.err"; then
        log "nfs-cp $from -> $to failed: $(tail -1 "$base/nfs-cp.err")"
        echo fail
        return
    fi
    t1=$(date +%s.%N)
    awk -v b="$size_bytes" -v a="$t0" -v z="$t1" 'BEGIN { printf "%.1f", b / 1e6 / (z - a) }'
}

median() {
    # Failed runs sort last and only win if most runs failed.
    printf '%s\n' "$@" | grep -v '^fail$' | sort -g | awk '
        { v[NR] = $1 }
        END { if (NR == 0) { print "n/a"; exit }
              if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

declare -A write_runs read_runs write_median read_median
# timed_copy runs in a subshell, so learn here, once, whether dropping caches works.
caches=""
drop_caches
# Start every server first, then interleave them run by run, reversing the order on every
# other run, so slow drift of the machine (disk warm-up, neighbours) hits both equally.
declare -A url_bases url_queries
live=()
for server in $servers; do
    export=$base/export-$server
    rm -rf "$export"
    mkdir -p "$export"
    case "$server" in
        eagernfs) start=start_eagernfs ;;
        ganesha) start=start_ganesha ;;
        *) log "unknown server $server"; exit 2 ;;
    esac
    if ! $start "$export"; then
        log "$server could not start; reporting n/a"
        write_median[$server]=n/a
        read_median[$server]=n/a
        continue
    fi
    url_bases[$server]=$url_base
    url_queries[$server]=$url_query
    live+=("$server")
    log "$server: $url_base/ $url_query"
done

for i in $(seq 1 "$runs"); do
    order=("${live[@]}")
    if [ $((i % 2)) -eq 0 ]; then
        order=()
        for ((k = ${#live[@]} - 1; k >= 0; k--)); do order+=("${live[k]}"); done
    fi
    for server in "${order[@]}"; do
        file_url="${url_bases[$server]}/bench-file-$i${url_queries[$server]}"
        # nfs-cp will not overwrite (it creates exclusively), so each run gets a fresh name.
        w=$(timed_copy "$src" "$file_url")
        r=$(timed_copy "$file_url" "$sink")
        if [ "$r" != fail ] && ! cmp -s "$src" "$sink"; then
            log "$server run $i: the file read back differs from the source"
            r=fail
        fi
        rm -f "$sink" "$base/export-$server/bench-file-$i"
        log "$server run $i: write $w MB/s, read $r MB/s"
        write_runs[$server]="${write_runs[$server]:-} $w"
        read_runs[$server]="${read_runs[$server]:-} $r"
    done
done
stop_eagernfs
stop_ganesha 2>/dev/null || true
for server in "${live[@]}"; do
    # shellcheck disable=SC2086 # the run lists are space-separated numbers
    write_median[$server]=$(median ${write_runs[$server]})
    # shellcheck disable=SC2086
    read_median[$server]=$(median ${read_runs[$server]})
done

ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'
}

echo "### nfs-cp, ${size_mib} MiB sequential, median of ${runs} (MB/s = 10^6 B/s)"
echo
echo "| server | write MB/s | read MB/s | write runs | read runs |"
echo "|---|---:|---:|---|---|"
for server in $servers; do
    name=$server
    [ "$server" = ganesha ] && name="nfs-ganesha $(dpkg-query -W -f='${Version}' nfs-ganesha 2>/dev/null | cut -d- -f1) (VFS)"
    echo "| $name | ${write_median[$server]} | ${read_median[$server]} | ${write_runs[$server]:-} | ${read_runs[$server]:-} |"
done
if [[ " $servers " == *" eagernfs "* && " $servers " == *" ganesha "* ]]; then
    echo "| **eagernfs / ganesha** | $(ratio "${write_median[eagernfs]}" "${write_median[ganesha]}") | $(ratio "${read_median[eagernfs]}" "${read_median[ganesha]}") | | |"
fi
echo
echo "Client \`nfs-cp\` (libnfs $(dpkg-query -W -f='${Version}' libnfs-utils 2>/dev/null)), $pinning;" \
    "exports under $base ($(df --output=source "$base" | tail -1)); page cache $caches; $(nproc) CPUs."
