#!/usr/bin/env bash
# Several eagernfs heads on the test cluster's CephFS, each on its own loopback address.
#
#   scripts/heads.sh start N [EXTRA...]   start heads 1..N on 127.0.0.11, .12, … (HEADS_ADDR_BASE
#                                         + N), port $HEADS_PORT; prints "node address pid" per head
#   scripts/heads.sh kill I               kill -9 head I (a crash)
#   scripts/heads.sh freeze I / thaw I    SIGSTOP / SIGCONT head I (alive but cut off: once
#                                         another head took node I over, the thawed one exits 75)
#   scripts/heads.sh restart I [EXTRA...] start head I again (same node id and address; the
#                                         new process takes over the dead one's clients)
#   scripts/heads.sh stop                 stop every head this script started (SIGTERM)
#   scripts/heads.sh status               "node address pid up|down" per head
#
# The heads export the file system's root (cephfs://admin@cephfs/, mount it as nfs://ADDR/) and
# share their state in RADOS (pool cephfs_data, namespace $HEADS_NAMESPACE). Start the cluster
# first: scripts/ceph-cluster.sh start (the same CEPH_CLUSTER_DIR).
#
# Environment (all optional):
#   CEPH_CLUSTER_DIR   the test cluster's directory          (default /tmp/eagernfs-ceph)
#   HEADS_DIR          pids, logs, state dirs                (default $CEPH_CLUSTER_DIR/heads)
#   HEADS_PORT         the NFS port of every head            (default 2049)
#   HEADS_NAMESPACE    RADOS namespace of the shared state   (default heads)
#   HEADS_GRACE        grace period in seconds               (default 15)
#   HEADS_ADDR_BASE    head N listens on this address + N    (default 127.0.0.10; e.g. 127.0.3.10
#                      keeps one engineer's heads off another's)
#   EAGERNFS           the binary                            (default: target/release, else debug)
set -euo pipefail

cluster=${CEPH_CLUSTER_DIR:-/tmp/eagernfs-ceph}
dir=${HEADS_DIR:-$cluster/heads}
port=${HEADS_PORT:-2049}
ns=${HEADS_NAMESPACE:-heads}
grace=${HEADS_GRACE:-15}
addr_base=${HEADS_ADDR_BASE:-127.0.0.10}
[[ $addr_base =~ ^127\.[0-9]+\.[0-9]+\.([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -lt 240 ] ||
    { echo "heads.sh: HEADS_ADDR_BASE must be a loopback address 127.x.y.z with z < 240, not $addr_base" >&2; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${EAGERNFS:-}
if [ -z "$bin" ]; then
    for b in "$root/target/release/eagernfs" "$root/target/debug/eagernfs"; do
        [ -x "$b" ] && { bin=$b; break; }
    done
fi
log() { echo "heads.sh: $*" >&2; }
die() {
    log "$*"
    exit 1
}
[ -x "${bin:-}" ] || die "no eagernfs binary: cargo build --release, or set EAGERNFS"
cluster_checked=0
check_cluster() { # once, before the first head starts (the ceph tool takes about a second)
    [ "$cluster_checked" = 1 ] && return 0
    CEPH_CLUSTER_DIR=$cluster "$root/scripts/ceph-cluster.sh" status >/dev/null 2>&1 ||
        die "no test cluster answers in $cluster: scripts/ceph-cluster.sh start (with the same CEPH_CLUSTER_DIR)"
    cluster_checked=1
}

# addr_of, running, stop_recorded, status_recorded
source "$root/scripts/lib/heads.sh"

alive() { # pid file $1: the pid if it is running and an eagernfs
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && running "$pid" && grep -q eagernfs "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
}

start_one() { # node, extra args
    local n=$1 a
    shift
    a=$(addr_of "$n")
    check_cluster
    mkdir -p "$dir/$n"
    if alive "$dir/$n/pid" >/dev/null; then
        die "head $n is running (pid $(cat "$dir/$n/pid")); kill or stop it first"
    fi
    : >"$dir/$n/out"
    "$bin" serve "cephfs://admin@cephfs/?conf=$cluster/ceph.conf" --listen "$a:$port" \
        -o rw,no_root_squash --state-dir "$dir/$n/state" --node-id "$n" \
        --cluster-pool cephfs_data --cluster-namespace "$ns" --grace-period "$grace" "$@" \
        >"$dir/$n/out" 2>>"$dir/$n/log" &
    echo $! >"$dir/$n/pid"
    # A bound for a head that hangs, not a guess at how long a start takes: a take-over's start
    # waits out a lease and the other heads' confirmation, and on a busy machine with a slow
    # cluster it took longer than 30 s (issue 32).
    local i
    for i in $(seq 3600); do
        grep -q "listening on" "$dir/$n/out" && { echo "$n $a:$port $(cat "$dir/$n/pid")"; return 0; }
        running "$(cat "$dir/$n/pid")" || { tail -5 "$dir/$n/log" >&2; die "head $n exited"; }
        sleep 0.05
    done
    die "head $n did not listen within 180 s (see $dir/$n/log)"
}

case ${1:-} in
start)
    [ $# -ge 2 ] || die "usage: $0 start N [EXTRA...]"
    n=$2
    shift 2
    for i in $(seq "$n"); do start_one "$i" "$@"; done
    ;;
kill)
    pid=$(alive "$dir/${2:?head number}/pid") || die "head $2 is not running"
    kill -9 "$pid"
    echo "killed head $2 (pid $pid)"
    ;;
restart)
    n=${2:?head number}
    shift 2
    start_one "$n" "$@"
    ;;
stop) stop_recorded "$dir" 10 head ;;
status) status_recorded "$dir" ;;
freeze | thaw)
    pid=$(alive "$dir/${2:?head number}/pid") || die "head $2 is not running"
    if [ "$1" = freeze ]; then
        kill -STOP "$pid"
        echo "froze head $2 (pid $pid)"
    else
        kill -CONT "$pid"
        echo "thawed head $2 (pid $pid)"
    fi
    ;;
*) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
