#!/usr/bin/env bash
# NFS heads over one CephFS, side by side (issue 19): eagernfs (`cephfs://` export) against
# nfs-ganesha 4.3 FSAL_CEPH, with native CephFS as the ceiling, on the same one-node cluster.
# Ganesha runs twice: as shipped (libcephfs's defaults), and `ganesha-tuned` with the same
# libcephfs settings eagernfs makes (object cache, write-back, no in-memory debug log), so the
# ratio shows what is eagernfs and what is configuration.
#
#   scripts/bench-ceph.sh [--out DIR] [--rounds N] [--seconds S] [--stream-mib N] [--conf CONF]
#                         [--only STEP,...]   (steps: iops stream load small tar; default all)
#                         [--peers P,...]     (eagernfs ganesha ganesha-tuned native eagernfs-async;
#                                              default the first four)
#                         [--ramp FIRST:FACTOR:MAX]  (the call-rate ramp; default 1000:1.4:400000)
#
# `eagernfs-async` is eagernfs with an `async` export: it answers a CREATE, REMOVE or SETATTR at
# the MDS's early reply, as ganesha does, instead of waiting for the MDS's journal (what NFSv3
# asks, and what eagernfs does by default): the difference between the two is the price of that
# durability on this cluster.
#
# Workloads, per peer, in rounds that alternate the peers' order (medians over the rounds):
# - call rate: `eagernfs bench load`, SPEC SFS 3.0 mix, 32 clients, a ramp to saturation
#   (5 s steps); the knee is the highest offered rate achieved (≥ 90 %) with p99 < 10 ms.
# - 8 KiB random READ and WRITE at QD1 and QD16 from libnfs (tests/clients/nfsiops.c) on a
#   128 MiB file the server has read once (warm), with the NFS server's and the cluster's CPU
#   time per operation; WRITE cells end with the COMMIT of libnfs's close, counted.
# - 1 MiB streams, 8 in flight (`eagernfs bench stream`, WRITE ending with COMMIT), of
#   --stream-mib MiB.
# - small files: CREATE-only and READ-only `bench load` mixes (closed loop, 16 clients).
# - tar xf / cat every file / rm -r of a tree of 2,000 small files through `eagernfs mount`.
# Native CephFS does the streams and the random I/O through libcephfs in one process
# (tests/clients/cephbench.c) and the tar steps through ceph-fuse.
#
# Pinning, the same for every peer: clients on CPU 0, the NFS server on CPU 1, the Ceph
# daemons on both CPUs (pinned to CPU 1 with the server, libcephfs's write-back messages queue
# behind a starved OSD and its sender goes quadratic in the message's pieces: a pathology of the
# pinning, not of either server). Each peer works in a directory of its own (caps are never
# shared between peers) and its server is started fresh for each round. The cluster is CONF's (default: start
# scripts/ceph-cluster.sh's, stopped at the end if this started it).
#
# Writes DIR/table.md (tables; the README.md around them is written by hand), DIR/results.tsv, DIR/*.json.gz (load reports), DIR/*.svg
# (plots) and DIR/command.txt (default docs/benchmarks/ceph-YYYY-MM-DD). The binary is
# $EAGERNFS_BIN if set, else a release build.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/ceph-$(date +%Y-%m-%d)
rounds=3
seconds=10
stream_mib=1024
conf=
only=iops,stream,load,small,tar
peers_csv=eagernfs,ganesha,ganesha-tuned,native
ramp=1000:1.4:400000
orig_args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --stream-mib) stream_mib=$2; shift 2 ;;
        --conf) conf=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --peers) peers_csv=$2; shift 2 ;;
        --ramp) ramp=$2; shift 2 ;;
        -h | --help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-ceph: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "bench-ceph: $*" >&2; }
for step in ${only//,/ }; do
    case "$step" in
        iops | stream | load | small | tar) ;;
        *) echo "bench-ceph: unknown step '$step' in --only (steps: iops stream load small tar)" >&2; exit 2 ;;
    esac
done
want() { [[ ",$only," == *",$1,"* ]]; }
read -r -a all_peers <<<"${peers_csv//,/ }"
for peer in "${all_peers[@]}"; do
    case "$peer" in
        eagernfs | eagernfs-async | ganesha | ganesha-tuned | native) ;;
        *) echo "bench-ceph: unknown peer '$peer' in --peers (eagernfs eagernfs-async ganesha ganesha-tuned native)" >&2; exit 2 ;;
    esac
done
[[ $ramp =~ ^[0-9]+:[0-9.]+:[0-9]+$ ]] || { echo "bench-ceph: --ramp takes FIRST:FACTOR:MAX, e.g. 1000:1.4:400000" >&2; exit 2; }
bin=${EAGERNFS_BIN:-}
if [ -z "$bin" ]; then
    (cd "$repo" && cargo build --release -q -p eagernfs >&2)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
fi

started_cluster=0
if [ -z "$conf" ]; then
    scripts_status=0
    "$repo/scripts/ceph-cluster.sh" status >/dev/null 2>&1 || scripts_status=1
    conf=$("$repo/scripts/ceph-cluster.sh" start | tail -1)
    [ "$scripts_status" = 0 ] || started_cluster=1
fi
cluster_dir=$(dirname "$conf")
work=$(mktemp -d /var/tmp/eagernfs-bench-ceph.XXXXXX)
chmod 755 "$work"
server_pid=
cleanup() {
    for m in "$work"/mnt-*; do
        if [ -d "$m" ] && mountpoint -q "$m"; then
            "$bin" umount "$m" >/dev/null 2>&1 || umount -l "$m" 2>/dev/null || true
        fi
    done
    [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    GANESHA_RUN_DIR=$work/ganesha "$repo/scripts/ganesha.sh" stop >/dev/null 2>&1 || true
    mountpoint -q "$work/root" && umount "$work/root"
    rm -rf "$work"
    if [ "$started_cluster" = 1 ]; then
        CEPH_CLUSTER_DIR=$cluster_dir "$repo/scripts/ceph-cluster.sh" stop || true
    fi
}
trap cleanup EXIT
mkdir -p "$out" "$work/root" "$work/state"

# Clients.
# shellcheck disable=SC2046
cc -O2 -Wall -o "$work/nfsiops" "$repo/tests/clients/nfsiops.c" $(pkg-config --cflags --libs libnfs) -lpthread
cc -O2 -Wall -o "$work/cephbench" "$repo/tests/clients/cephbench.c" -lcephfs -lpthread

# Every thread of every Ceph daemon on both CPUs (see the header).
cluster_pids() { CEPH_CLUSTER_DIR=$cluster_dir "$repo/scripts/ceph-cluster.sh" pids | awk '{print $2}'; }
for p in $(cluster_pids); do taskset -a -cp 0,1 "$p" >/dev/null; done
# ganesha-tuned's ceph.conf: the cluster's, with the libcephfs settings eagernfs makes.
cp "$conf" "$work/tuned.conf"
{
    echo
    echo "[client]"
    echo "client oc size = 536870912"
    echo "client oc max dirty = 268435456"
    echo "client oc target dirty = 67108864"
    echo "client oc max dirty age = 30"
    for sub in client objectcacher objecter ms monc mgrc auth crypto finisher asok buffer filer striper \
        timer context perfcounter throttle journaler rados none lockdep heartbeatmap optracker tp; do
        echo "debug $sub = 0/0"
    done
} >>"$work/tuned.conf"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
cluster_ticks() { local t=0; for p in $(cluster_pids); do t=$((t + $(cpu_ticks "$p"))); done; echo "$t"; }
hz=$(getconf CLK_TCK)

# The whole file system through ceph-fuse (CPU 0): to make each peer's directory and files.
taskset -c 0 ceph-fuse --conf "$conf" --client_fs cephfs "$work/root" >/dev/null 2>&1
top=bench-$$
mkdir -p "$work/root/$top"
for peer in "${all_peers[@]}"; do
    mkdir -p "$work/root/$top/$peer"
    chmod 777 "$work/root/$top/$peer"
done

# The tree for the tar steps: 2,000 files of 1-32 KiB in 50 directories (deterministic).
python3 - "$work/tree" <<'EOF'
import os, random, sys
root = sys.argv[1]
rng = random.Random(19)
for d in range(50):
    os.makedirs(f"{root}/d{d:02}", exist_ok=True)
    for f in range(40):
        with open(f"{root}/d{d:02}/f{f:02}", "wb") as fh:
            fh.write(rng.randbytes(rng.randint(1024, 32768)))
EOF
tar -cf "$work/tree.tar" -C "$work" tree

port=$((20000 + RANDOM % 20000))
: >"$work/results.tsv"
record() { echo -e "$*" >>"$work/results.tsv"; }

start_server() { # peer -> sets url, server_pid
    local peer=$1
    case "$peer" in
        eagernfs | eagernfs-async)
            local opts=rw,insecure,no_root_squash
            [ "$peer" = eagernfs ] || opts=$opts,async
            rm -rf "$work/state" "$work/eagernfs.out"
            mkdir -p "$work/state"
            taskset -c 1 "$bin" serve "cephfs://admin@cephfs/$top/$peer?conf=$conf" --listen "127.0.0.1:$port" \
                --state-dir "$work/state" -o "$opts" >"$work/eagernfs.out" 2>"$work/eagernfs.log" &
            server_pid=$!
            until grep -q "listening on" "$work/eagernfs.out" 2>/dev/null; do
                kill -0 "$server_pid" 2>/dev/null || { cat "$work/eagernfs.log" >&2; exit 1; }
                sleep 0.1
            done
            url="nfs://127.0.0.1:$port/$top/$peer"
            ;;
        ganesha | ganesha-tuned)
            local g gconf=$conf
            [ "$peer" = ganesha ] || gconf=$work/tuned.conf
            g=$(GANESHA_RUN_DIR=$work/ganesha GANESHA_CEPH_CONF=$gconf GANESHA_MNT_PORT=$((port + 11)) \
                taskset -c 1 "$repo/scripts/ganesha.sh" start "/$top/$peer" "$((port + 10))" ceph)
            server_pid=$(pgrep -f "ganesha.nfsd -F -f $work/ganesha" | head -1)
            url="nfs://127.0.0.1:$((port + 10))/$top/$peer?mountport=$((port + 11))"
            [ -n "$g" ]
            ;;
    esac
}
stop_server() { # peer
    case "$1" in
        eagernfs | eagernfs-async) kill -TERM "$server_pid"; wait "$server_pid" || true ;;
        ganesha | ganesha-tuned)
            GANESHA_RUN_DIR=$work/ganesha "$repo/scripts/ganesha.sh" stop >/dev/null 2>&1
            # FSAL_CEPH leaves its MDS session behind on purpose (so that its next start can
            # reclaim it): until the MDS times it out, its capabilities hold every file it
            # touched. End it, as its next start would.
            evict_ganesha_sessions
            ;;
    esac
    server_pid=
}
evict_ganesha_sessions() {
    local id
    for id in $(timeout 30 ceph --conf "$conf" tell mds.a session ls 2>/dev/null | python3 -c '
import json, sys
for s in json.load(sys.stdin):
    if (s.get("client_metadata", {}).get("uuid") or "").startswith("ganesha-"):
        print(s["id"])'); do
        timeout 30 ceph --conf "$conf" tell mds.a client evict "id=$id" >/dev/null 2>&1 || true
    done
}
with_query() { # url extra -> url with extra query items
    case "$1" in *\?*) echo "$1&$2" ;; *) echo "$1?$2" ;; esac
}
file_url() { # url name -> the URL of file NAME in the export URL names
    case "$1" in
        *\?*) echo "${1%%\?*}/$2?${1#*\?}" ;;
        *) echo "$1/$2" ;;
    esac
}
libnfs_url() { # url -> a libnfs URL (nfsport and mountport, no :port)
    local u=$1 p rest
    p=$(echo "$u" | sed -n 's|^nfs://127.0.0.1:\([0-9]*\)/.*|\1|p')
    rest=$(echo "$u" | sed 's|^nfs://127.0.0.1:[0-9]*||')
    case "$rest" in
        *mountport=*) echo "nfs://127.0.0.1${rest}&nfsport=$p" ;;
        *) echo "nfs://127.0.0.1${rest}?nfsport=$p&mountport=$p" ;;
    esac
}

run_nfs_peer() { # round peer
    local round=$1 peer=$2 sdir="$work/root/$top/$peer"
    # The random-I/O file, written beforehand through ceph-fuse.
    head -c $((128 << 20)) /dev/urandom >"$sdir/iops"
    sync "$sdir/iops"
    start_server "$peer"
    local lurl
    lurl=$(libnfs_url "$url")
    # Warm: the server reads the file once (as it would have served it), untimed.
    taskset -c 0 "$bin" cat "$(file_url "$url" iops)" >/dev/null
    # Random I/O.
    want iops && for mode in read write; do
        for qd in 1 16; do
            local b c a ca line
            b=$(cpu_ticks "$server_pid"); c=$(cluster_ticks)
            line=$(taskset -c 0 "$work/nfsiops" "$lurl" iops "$mode" "$seconds" "$qd")
            a=$(cpu_ticks "$server_pid"); ca=$(cluster_ticks)
            log "round $round $peer $mode QD$qd: $line"
            record "$round\t$peer\tiops-$mode-qd$qd\t$line server_ticks=$((a - b)) cluster_ticks=$((ca - c))"
        done
    done
    # Streams.
    want stream && for dir in write read; do
        local line
        line=$(taskset -c 0 "$bin" bench stream "$url" --direction "$dir" --size "${stream_mib}MiB" \
            --rpc-size 1MiB --in-flight 8 --file stream --no-progress 2>&1 |
            sed -n 's/^ *MB\/s *\([0-9.]*\) to the last reply\( · \([0-9.]*\) with COMMIT\)\{0,1\}.*/mbps=\1 mbps_with_sync=\3/p')
        log "round $round $peer stream $dir: $line"
        record "$round\t$peer\tstream-$dir\t$line"
    done
    rm -f "$sdir/stream" "$sdir/iops"
    # Call rate: the SFS mix, a ramp to saturation.
    want load && taskset -c 0 "$bin" bench load "$url" --clients 32 --ramp "$ramp" --step-seconds 5 \
        --max-seconds 200 --no-progress --label "$peer" --json "$work/$peer-load-$round.json.gz" \
        >"$work/$peer-load-$round.txt" 2>&1 || log "$peer load: $(tail -3 "$work/$peer-load-$round.txt")"
    want load && record "$round\t$peer\tload\t$work/$peer-load-$round.json.gz"
    # Small files: creates, then reads of the load's file set.
    want small && for mix in CREATE READ; do
        taskset -c 0 "$bin" bench load "$url" --mix "$mix=1" --closed-loop 8 --clients 16 \
            --step-seconds "$seconds" --max-seconds "$((seconds * 2))" --file-size 16KiB --no-progress \
            --label "$peer-$mix" --json "$work/$peer-small-$mix-$round.json.gz" \
            >"$work/$peer-small-$mix-$round.txt" 2>&1 || log "$peer $mix: $(tail -3 "$work/$peer-small-$mix-$round.txt")"
        record "$round\t$peer\tsmall-$mix\t$work/$peer-small-$mix-$round.json.gz"
    done
    # tar xf, cat, rm -r through eagernfs mount.
    if want tar; then
        mkdir -p "$work/mnt-$peer"
        local mnt="$work/mnt-$peer"
        mount_it() { taskset -c 0 "$bin" mount "$url" "$mnt" -o vers=3; }
        mount_it
        tar_steps "$round" "$peer" "$mnt" "$bin umount $mnt" mount_it
        "$bin" umount "$mnt"
    fi
    stop_server "$peer"
    rm -rf "${sdir:?}"/*
}

tar_steps() { # round peer mountpoint unmount-command remount-function
    local round=$1 peer=$2 mnt=$3 umount_cmd=$4 remount=$5 t0
    t0=$(date +%s.%N)
    taskset -c 0 tar -xf "$work/tree.tar" -C "$mnt"
    sync -f "$mnt" 2>/dev/null || true
    record "$round\t$peer\tuntar\tseconds=$(echo "$(date +%s.%N) - $t0" | bc)"
    # Again from the server: a fresh mount holds nothing in its cache.
    $umount_cmd
    $remount
    t0=$(date +%s.%N)
    taskset -c 0 find "$mnt/tree" -type f -exec cat {} + >/dev/null
    record "$round\t$peer\tcat\tseconds=$(echo "$(date +%s.%N) - $t0" | bc)"
    t0=$(date +%s.%N)
    taskset -c 0 rm -r "$mnt/tree"
    record "$round\t$peer\trm\tseconds=$(echo "$(date +%s.%N) - $t0" | bc)"
    log "round $round $peer tar steps: $(grep -P "^$round\t$peer\t(untar|cat|rm)\t" "$work/results.tsv" | cut -f3,4 | tr '\n\t' '  ')"
}

run_native() { # round
    local round=$1 sdir="$work/root/$top/native"
    head -c $((128 << 20)) /dev/urandom >"$sdir/iops"
    sync "$sdir/iops"
    want iops && for mode in read write; do
        for qd in 1 16; do
            local c ca line
            c=$(cluster_ticks)
            line=$(taskset -c 0 "$work/cephbench" "$conf" cephfs randio "/$top/native/iops" "$mode" "$seconds" "$qd")
            ca=$(cluster_ticks)
            log "round $round native $mode QD$qd: $line"
            record "$round\tnative\tiops-$mode-qd$qd\t$line server_ticks=0 cluster_ticks=$((ca - c))"
        done
    done
    local line
    want stream && line=$(taskset -c 0 "$work/cephbench" "$conf" cephfs stream "/$top/native/stream" "$stream_mib" 8)
    want stream && log "round $round native streams: $line"
    want stream && record "$round\tnative\tstream-write\t$(echo "$line" | sed 's/.*write_mbps=\([0-9.]*\) write_mbps_with_sync=\([0-9.]*\).*/mbps=\1 mbps_with_sync=\2/')"
    want stream && record "$round\tnative\tstream-read\t$(echo "$line" | sed 's/.*read_mbps=\([0-9.]*\).*/mbps=\1/')"
    rm -f "$sdir/stream" "$sdir/iops"
    want tar || return 0
    mkdir -p "$work/mnt-native"
    local mnt="$work/mnt-native"
    mount_native() { taskset -c 0 ceph-fuse --conf "$conf" --client_fs cephfs -r "/$top/native" "$mnt" >/dev/null 2>&1; }
    mount_native
    tar_steps "$round" native "$mnt" "umount $mnt" mount_native
    umount "$mnt"
}

log "load: $(uptime)"
echo "load before: $(uptime)" >"$work/load.txt"
for round in $(seq 1 "$rounds"); do
    # Rotate the order: each peer goes first in turn.
    n=${#all_peers[@]}
    order=("${all_peers[@]:$(((round - 1) % n))}" "${all_peers[@]:0:$(((round - 1) % n))}")
    for peer in "${order[@]}"; do
        log "round $round: $peer ($(uptime | sed 's/.*load/load/'))"
        echo "round $round $peer: $(uptime)" >>"$work/load.txt"
        if [ "$peer" = native ] && ! want iops && ! want stream && ! want tar; then continue; fi
        if [ "$peer" = native ]; then run_native "$round"; else run_nfs_peer "$round" "$peer"; fi
    done
done
echo "load after: $(uptime)" >>"$work/load.txt"

cp "$work/results.tsv" "$out/results.tsv"
cp "$work/load.txt" "$out/load.txt"
for f in "$work"/*.json.gz; do cp "$f" "$out/"; done
sed -i "s|$work/||" "$out/results.tsv"
python3 "$repo/scripts/bench-ceph-report.py" "$out" "$hz" "$seconds" "$stream_mib" >"$out/table.md"
{
    echo "scripts/bench-ceph.sh ${orig_args[*]}"
    echo "eagernfs $("$bin" --version | head -1) · nfs-ganesha $(dpkg-query -W -f='${Version}' nfs-ganesha-ceph) FSAL_CEPH · ceph $(ceph --version | awk '{print $3}') · $(uname -r) · $(nproc) CPUs · $(date -u +%Y-%m-%dT%H:%MZ)"
} >"$out/command.txt"
cat "$out/table.md"
