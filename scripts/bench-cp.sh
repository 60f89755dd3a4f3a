#!/usr/bin/env bash
# The issue's benchmark: sequential write and read of one large file with libnfs `nfs-cp` and
# with `eagernfs cp`, against eagernfs and nfs-ganesha (FSAL VFS) in the same run, exports on
# the same disk. The client is pinned to CPU 0 and the server to CPU 1; each measurement is
# repeated and the median reported, with eagernfs-cp/nfs-cp and eagernfs/ganesha ratios, as a
# Markdown table on stdout.
#
#   scripts/bench-cp.sh [--runs N] [--size-mib M] [--servers "eagernfs ganesha"]
#                       [--clients "nfs-cp eagernfs"] [--base DIR] [--eagernfs PATH]
#                       [--timeout-s S] [--no-warmup] [--warm]
#
#   --runs N         repetitions per server, client and direction   (default 3)
#   --size-mib M     file size                                        (default 1024 = 1 GiB)
#   --servers LIST   which servers to measure                          (default "eagernfs ganesha")
#   --clients LIST   which clients: nfs-cp, eagernfs (`eagernfs cp -q`) (default "nfs-cp eagernfs")
#   --base DIR       where both exports and the source file live       (default /var/tmp/eagernfs-bench)
#   --eagernfs PATH  server and client binary (default: cargo build --release, target/release/eagernfs)
#   --timeout-s S    bound on any single copy; a run over it counts as failed (default 300)
#   --no-warmup      skip the untimed write + read per server before the timed runs
#   --warm           keep page caches: reads come from the server's memory, so they measure the
#                    server, the network and the client rather than the disk
#
# "Write" is a copy local -> server, "read" is server -> a file on tmpfs (nfs-cp cannot write to
# /dev/null; `eagernfs cp` fsyncs what it downloads, which costs nothing on tmpfs). Page caches
# are dropped before every copy when the kernel lets us (unless --warm), so reads come from the
# server's disk, not its memory. Every copy is logged on stderr with its exact command line.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
runs=3
size_mib=1024
servers="eagernfs ganesha"
clients="nfs-cp eagernfs"
base=/var/tmp/eagernfs-bench
eagernfs_bin=""
timeout_s=300
warmup=1
warm=0

while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=$2; shift 2 ;;
        --size-mib) size_mib=$2; shift 2 ;;
        --servers) servers=$2; shift 2 ;;
        --clients) clients=$2; shift 2 ;;
        --base) base=$2; shift 2 ;;
        --eagernfs) eagernfs_bin=$2; shift 2 ;;
        --timeout-s) timeout_s=$2; shift 2 ;;
        --no-warmup) warmup=0; shift ;;
        --warm) warm=1; shift ;;
        -h | --help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-cp: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "bench-cp: --runs must be a positive integer" >&2; exit 2; }
[[ "$size_mib" =~ ^[1-9][0-9]*$ ]] || { echo "bench-cp: --size-mib must be a positive integer" >&2; exit 2; }

for client in $clients; do
    case "$client" in
        nfs-cp | eagernfs) ;;
        *) echo "bench-cp: unknown client $client (nfs-cp or eagernfs)" >&2; exit 2 ;;
    esac
done
[ -n "${clients// /}" ] || { echo "bench-cp: --clients is empty" >&2; exit 2; }

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
# One binary is both the eagernfs server and the `eagernfs cp` client; build it once, up front,
# so no build runs between timed copies.
if [ -z "$eagernfs_bin" ] && [[ " $servers $clients " == *" eagernfs "* ]]; then
    log "building eagernfs (release)"
    (cd "$repo" && cargo build --release -p eagernfs >&2)
    eagernfs_bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
    built_here=1
fi
# Which eagernfs the numbers belong to: the commit a build made here came from (and whether
# the tree had uncommitted changes), or the given binary's path, date and checksum.
eagernfs_provenance() {
    if [ -n "${built_here:-}" ]; then
        echo "eagernfs built here from $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')$(
            [ -z "$(git -C "$repo" status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null)" ] ||
                echo ' + uncommitted changes')"
    elif [ -n "${eagernfs_bin}" ]; then
        echo "eagernfs binary ${eagernfs_bin} (built $(date -r "${eagernfs_bin}" '+%F %T'), sha256 $(sha256sum "${eagernfs_bin}" | cut -c1-12))"
    fi
}
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
    if [ "$warm" = 1 ]; then
        caches="kept (--warm: reads come from the server's memory)"
        return
    fi
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

# The command line of one copy by CLIENT (nfs-cp or eagernfs), into the array copy_cmd.
copy_command() {
    local client=$1 from=$2 to=$3
    case "$client" in
        nfs-cp) copy_cmd=(nfs-cp "$from" "$to") ;;
        eagernfs) copy_cmd=("$eagernfs_bin" cp -q "$from" "$to") ;;
    esac
    copy_cmd=(timeout "$timeout_s" "${client_pin[@]}" "${copy_cmd[@]}")
}

# Times one bounded copy by CLIENT; prints MB/s (10^6 bytes per second) or "fail".
timed_copy() {
    local client=$1 from=$2 to=$3 t0 t1
    copy_command "$client" "$from" "$to"
    drop_caches
    log "running: $(printf '%q ' "${copy_cmd[@]}")"
    t0=$(date +%s.%N)
    if ! "${copy_cmd[@]}" >/dev/null 2>"$base/copy.err"; then
        log "$client $from -> $to failed: $(tail -1 "$base/copy.err")"
        echo fail
        return
    fi
    t1=$(date +%s.%N)
    awk -v b="$size_bytes" -v a="$t0" -v z="$t1" 'BEGIN { printf "%.1f", b / 1e6 / (z - a) }'
}

# The list in reverse order (one word per element).
reversed() {
    local -a words=($1)
    local k
    for ((k = ${#words[@]} - 1; k >= 0; k--)); do printf "%s " "${words[k]}"; done
}

median() {
    # Failed runs sort last and only win if most runs failed.
    printf '%s\n' "$@" | grep -v '^fail$' | sort -g | awk '
        { v[NR] = $1 }
        END { if (NR == 0) { print "n/a"; exit }
              if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

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
        continue
    fi
    url_bases[$server]=$url_base
    url_queries[$server]=$url_query
    live+=("$server")
    log "$server: $url_base/ $url_query"
done

# The first copy after the servers start ran at a third of the speed of the later ones,
# whichever server came first (docs/benchmarks/cp-and-fuse-2026-11-21), so one untimed write
# and read per server, with the first client, keeps that start-up effect out of the medians.
if [ "$warmup" = 1 ]; then
    # shellcheck disable=SC2206 # client names are single words
    first_client=($clients)
    for server in "${live[@]}"; do
        file_url="${url_bases[$server]}/bench-warmup${url_queries[$server]}"
        w=$(timed_copy "${first_client[0]}" "$src" "$file_url")
        r=$(timed_copy "${first_client[0]}" "$file_url" "$sink")
        rm -f "$sink" "$base/export-$server/bench-warmup"
        log "$server/${first_client[0]} warm-up (not counted): write $w MB/s, read $r MB/s"
    done
fi

# Runs and medians per "server,client,direction" (direction: write or read).
declare -A runs_of median_of
for i in $(seq 1 "$runs"); do
    # shellcheck disable=SC2206 # server and client names are single words
    server_order=(${live[*]})
    # shellcheck disable=SC2206
    client_order=($clients)
    if [ $((i % 2)) -eq 0 ]; then
        # shellcheck disable=SC2207
        server_order=($(reversed "${live[*]}"))
        # shellcheck disable=SC2207
        client_order=($(reversed "$clients"))
    fi
    for server in "${server_order[@]}"; do
        for client in "${client_order[@]}"; do
            name=bench-file-$client-$i
            file_url="${url_bases[$server]}/$name${url_queries[$server]}"
            # nfs-cp will not overwrite (it creates exclusively), so each copy gets a fresh name.
            w=$(timed_copy "$client" "$src" "$file_url")
            r=$(timed_copy "$client" "$file_url" "$sink")
            if [ "$r" != fail ] && ! cmp -s "$src" "$sink"; then
                log "$server/$client run $i: the file read back differs from the source"
                r=fail
            fi
            rm -f "$sink" "$base/export-$server/$name"
            log "$server/$client run $i: write $w MB/s, read $r MB/s"
            runs_of[$server,$client,write]="${runs_of[$server,$client,write]:-} $w"
            runs_of[$server,$client,read]="${runs_of[$server,$client,read]:-} $r"
        done
    done
done
stop_eagernfs
stop_ganesha 2>/dev/null || true
for key in "${!runs_of[@]}"; do
    # shellcheck disable=SC2086 # the run lists are space-separated numbers
    median_of[$key]=$(median ${runs_of[$key]})
done

ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'
}

client_name() {
    case "$1" in
        nfs-cp) echo nfs-cp ;;
        eagernfs) echo eagernfs-cp ;;
    esac
}
server_name() {
    case "$1" in
        ganesha) echo "nfs-ganesha $(dpkg-query -W -f='${Version}' nfs-ganesha 2>/dev/null | cut -d- -f1) (VFS)" ;;
        *) echo "$1" ;;
    esac
}
both_clients=0
[[ " $clients " == *" nfs-cp "* && " $clients " == *" eagernfs "* ]] && both_clients=1

echo "### ${size_mib} MiB sequential copy, median of ${runs} (MB/s = 10^6 B/s)"
echo
header="| server | direction |"
rule="|---|---|"
for client in $clients; do header+=" $(client_name "$client") MB/s |"; rule+="---:|"; done
[ "$both_clients" = 1 ] && { header+=" eagernfs-cp / nfs-cp |"; rule+="---:|"; }
for client in $clients; do header+=" $(client_name "$client") runs |"; rule+="---|"; done
echo "$header"
echo "$rule"
for server in $servers; do
    for dir in write read; do
        row="| $(server_name "$server") | $dir |"
        for client in $clients; do row+=" ${median_of[$server,$client,$dir]:-n/a} |"; done
        [ "$both_clients" = 1 ] &&
            row+=" $(ratio "${median_of[$server,eagernfs,$dir]:-}" "${median_of[$server,nfs-cp,$dir]:-}") |"
        for client in $clients; do row+="${runs_of[$server,$client,$dir]:-} |"; done
        echo "$row"
    done
done
if [[ " $servers " == *" eagernfs "* && " $servers " == *" ganesha "* ]]; then
    for dir in write read; do
        row="| **eagernfs / ganesha** | $dir |"
        for client in $clients; do
            row+=" $(ratio "${median_of[eagernfs,$client,$dir]:-}" "${median_of[ganesha,$client,$dir]:-}") |"
        done
        [ "$both_clients" = 1 ] && row+=" |"
        for client in $clients; do row+=" |"; done
        echo "$row"
    done
fi
echo
clients_desc=""
for client in $clients; do
    case "$client" in
        nfs-cp) clients_desc+="\`nfs-cp SRC DST\` (libnfs $(dpkg-query -W -f='${Version}' libnfs-utils 2>/dev/null)); " ;;
        eagernfs) clients_desc+="\`eagernfs cp -q SRC DST\` ($(eagernfs_provenance)); " ;;
    esac
done
warmup_desc="no warm-up"
[ "$warmup" = 1 ] && warmup_desc="one untimed write + read per server first"
echo "Clients: ${clients_desc}$pinning; each copy bounded by ${timeout_s} s; $warmup_desc;" \
    "exports under $base ($(df --output=source "$base" | tail -1)); page cache $caches; $(nproc) CPUs." \
    "Ratios are of the medians; a run that failed shows as \`fail\` and is left out of its median."
