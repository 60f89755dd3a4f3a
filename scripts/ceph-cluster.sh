#!/usr/bin/env bash
# A one-node Ceph cluster on loopback for tests and benchmarks of the CephFS backend.
#
#   scripts/ceph-cluster.sh start            start it (installing the packages if missing); the
#                                            last line on stdout is the ceph.conf to use
#   scripts/ceph-cluster.sh stop             stop the daemons this script started, forget the data
#   scripts/ceph-cluster.sh status           exit 0 if the cluster answers and the MDS is active
#   scripts/ceph-cluster.sh conf             print the ceph.conf path (exit 1 if not running)
#   scripts/ceph-cluster.sh stop-mds         stop the MDS only (tests of a dead MDS)
#   scripts/ceph-cluster.sh start-mds        start it again and wait until it is active
#   scripts/ceph-cluster.sh pids             the daemons' pids, one "name pid" per line
#
# One monitor, one manager, one OSD on the `memstore` object store (data in memory: no disk, no
# block device, gone at `stop`), pools of size 1 and one MDS, all bound to 127.0.0.1 with cephx
# on and small memory settings; a file system named `cephfs`. Ceph's own micro-osd.sh does the
# same for go-ceph's CI; this script differs in keeping cephx, recording the pid of every daemon
# it starts (so `stop` ends exactly those), and being idempotent: `start` on a healthy cluster
# only prints the conf path again.
#
# Environment (all optional):
#   CEPH_CLUSTER_DIR   data, conf, keyrings, logs, pids     (default /tmp/eagernfs-ceph)
#   CEPH_MON_PORT      the monitor's port (msgr2)           (default 46789)
#   CEPH_PORT_MIN      first port the other daemons may use (default 46800; they take ~10)
#   CEPH_MEMSTORE_MIB  the OSD's in-memory capacity         (default 4096)
#   CEPH_CPUS          CPU list every daemon is bound to (taskset -c), e.g. 1 (default: none)
#   CEPH_TIMEOUT_S     how long to wait for each step       (default 120)
#
# Packages: ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph-common (the daemons, the client,
# the `ceph` tool) and libcephfs-dev librados-dev; nfs-ganesha-ceph for the benchmarks'
# FSAL_CEPH peer; iptables for the tests that cut a head off from the cluster. Missing ones are installed with apt-get (root or sudo).
set -euo pipefail

dir=${CEPH_CLUSTER_DIR:-/tmp/eagernfs-ceph}
mon_port=${CEPH_MON_PORT:-46789}
port_min=${CEPH_PORT_MIN:-46800}
memstore_mib=${CEPH_MEMSTORE_MIB:-4096}
timeout_s=${CEPH_TIMEOUT_S:-120}
conf=$dir/ceph.conf
fs_name=cephfs

log() { echo "ceph-cluster.sh: $*" >&2; }
die() {
    log "$*"
    exit 1
}

usage() {
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

packages=(ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph-common libcephfs-dev librados-dev nfs-ganesha-ceph iptables)

install_packages() {
    local missing=() pkg
    for pkg in "${packages[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
            missing+=("$pkg")
        fi
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    log "installing ${missing[*]}"
    local sudo_cmd=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || die "need root (or sudo) to install: ${missing[*]}"
        sudo_cmd=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Another apt run (a colleague's, CI's) may hold the lock: wait for it instead of failing.
    "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 update -q >&2
    "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
        "${missing[@]}" >&2
}

# Run the ceph tool against this cluster with a bounded wait (it retries for ever otherwise).
cephc() { timeout "$timeout_s" ceph --conf "$conf" --connect-timeout 15 "$@"; }

now_s() { date +%s; }

# The pid recorded for daemon $1, if it is alive and still the process we started.
daemon_pid() {
    local f="$dir/pids/$1" pid
    [ -f "$f" ] || return 1
    pid=$(cat "$f")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    # A recycled pid would belong to some other program: check it is a ceph daemon using our conf.
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--conf $conf" || return 1
    echo "$pid"
}

# Start daemon binary $1 named $2 ("mon.a") in the foreground, detached, recording its pid.
launch() {
    local bin=$1 name=$2 pin=()
    shift 2
    [ -n "${CEPH_CPUS:-}" ] && pin=(taskset -c "$CEPH_CPUS")
    mkdir -p "$dir/pids" "$dir/log"
    # -f: stay in the foreground (so $! is the daemon), logging to its log file; setsid and the
    # redirections keep it from holding the caller's terminal or pipes.
    setsid "${pin[@]}" "$bin" --conf "$conf" --name "$name" -f "$@" \
        </dev/null >>"$dir/log/$name.out" 2>&1 &
    echo $! >"$dir/pids/$name"
}

# Stop daemon $1 (TERM, then KILL after 20 s) and wait until it is gone.
halt() {
    local name=$1 pid deadline
    pid=$(daemon_pid "$name") || {
        rm -f "$dir/pids/$name"
        return 0
    }
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$(($(now_s) + 20))
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$(now_s)" -ge "$deadline" ]; then
            log "$name (pid $pid) ignored SIGTERM for 20 s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
            break
        fi
        sleep 0.1
    done
    rm -f "$dir/pids/$name"
}

# Wait until command "$@" succeeds, up to the timeout; $1 says what for.
wait_for() {
    local what=$1 deadline
    shift
    deadline=$(($(now_s) + timeout_s))
    until "$@" >/dev/null 2>&1; do
        if [ "$(now_s)" -ge "$deadline" ]; then
            log "timed out after ${timeout_s} s waiting for $what; log tails:"
            tail -n 5 "$dir"/log/*.log >&2 2>/dev/null || true
            return 1
        fi
        sleep 0.5
    done
}

mds_active() { cephc fs status "$fs_name" --format json 2>/dev/null | grep -q '"state": *"active"'; }

write_conf() {
    mkdir -p "$dir"/{mon,mgr,osd,mds,run,log,pids}
    local fsid
    fsid=$(cat /proc/sys/kernel/random/uuid)
    cat >"$conf" <<CONF
# Generated by scripts/ceph-cluster.sh: a one-node test cluster on loopback.
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
public addr = 127.0.0.1
ms bind msgr1 = false
ms bind port min = $port_min
ms bind port max = $((port_min + 99))
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $dir/keyring
# Every client here is new enough: refuse the old, insecure global_id reclaim (and its warning).
auth allow insecure global id reclaim = false
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
log to stderr = false
err to stderr = true
# One OSD: every pool has one copy, and nothing warns about it.
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
# Small and quiet: the machine is shared.
ms async op threads = 1
mgr initial modules = iostat
mon data avail warn = 2
mon data avail crit = 1

[mon]
mon data = $dir/mon
mon allow pool delete = true

[mgr]
mgr data = $dir/mgr

[osd]
osd data = $dir/osd
osd objectstore = memstore
memstore device bytes = $((memstore_mib << 20))
osd memory target = 1073741824
osd op num shards = 1
osd op num threads per shard = 2

[mds]
mds data = $dir/mds
mds cache memory limit = 268435456
# A restarted MDS waits this long for every client it knew to reconnect (default 45 s): the
# sessions of servers earlier tests killed with SIGKILL would hold each MDS restart that long.
mds reconnect timeout = 10
CONF
}

start_cluster() {
    install_packages
    if [ -f "$conf" ] && daemon_pid mon.a >/dev/null && daemon_pid mgr.x >/dev/null &&
        daemon_pid osd.0 >/dev/null && daemon_pid mds.a >/dev/null && mds_active; then
        log "already running ($dir)"
        echo "$conf"
        return 0
    fi
    # Anything half-started by an earlier run goes first: a cluster is cheap to make again.
    stop_cluster
    local started
    started=$(now_s)
    write_conf

    # Keys: the monitor's, and the admin's (the default client id, `admin`).
    ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
    ceph-authtool "$dir/keyring" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null
    chmod 600 "$dir/keyring"

    # Monitor.
    monmaptool --create --fsid "$(awk '/^fsid/ {print $3}' "$conf")" \
        --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" >/dev/null
    ceph-mon --conf "$conf" --name mon.a --mkfs --monmap "$dir/monmap" --keyring "$dir/keyring" \
        >>"$dir/log/mkfs.out" 2>&1
    launch ceph-mon mon.a
    wait_for "the monitor" cephc mon stat

    # Manager.
    cephc auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
        -o "$dir/mgr/keyring" >/dev/null
    launch ceph-mgr mgr.x --keyring "$dir/mgr/keyring"

    # OSD on memstore.
    local osd_uuid
    osd_uuid=$(cat /proc/sys/kernel/random/uuid)
    cephc osd new "$osd_uuid" >/dev/null
    cephc auth get-or-create osd.0 mon 'allow profile osd' mgr 'allow profile osd' osd 'allow *' \
        -o "$dir/osd/keyring" >/dev/null
    ceph-osd --conf "$conf" --name osd.0 --mkfs --osd-uuid "$osd_uuid" \
        --keyring "$dir/osd/keyring" >>"$dir/log/mkfs.out" 2>&1
    launch ceph-osd osd.0 --keyring "$dir/osd/keyring"
    wait_for "the OSD to come up" sh -c "timeout 20 ceph --conf '$conf' osd stat | grep -q '1 up'"

    # File system and MDS.
    cephc osd pool create "${fs_name}_metadata" 8 >/dev/null 2>&1
    cephc osd pool create "${fs_name}_data" 8 >/dev/null 2>&1
    cephc fs new "$fs_name" "${fs_name}_metadata" "${fs_name}_data" >/dev/null 2>&1
    cephc auth get-or-create mds.a mon 'allow profile mds' mgr 'allow profile mds' mds 'allow *' \
        osd 'allow *' -o "$dir/mds/keyring" >/dev/null
    launch ceph-mds mds.a --keyring "$dir/mds/keyring"
    wait_for "the MDS of $fs_name to become active" mds_active
    log "cluster up in $(($(now_s) - started)) s ($dir; daemons: $(ls "$dir/pids" | tr '\n' ' '))"
    echo "$conf"
}

stop_cluster() {
    local name
    # The MDS first: it writes to the OSD as it stops.
    for name in mds.a mgr.x osd.0 mon.a; do
        halt "$name"
    done
    # The data lives in memory; what is on disk (the monitor's store, keys, logs) is rebuilt by
    # `start`. Only ever remove our own directory.
    if [ -f "$conf" ] && grep -q 'Generated by scripts/ceph-cluster.sh' "$conf"; then
        rm -rf "${dir:?}"/{mon,mgr,osd,mds,run,pids,keyring,monmap,ceph.conf}
    fi
}

status() {
    [ -f "$conf" ] || die "not running (no $conf)"
    local name ok=0
    for name in mon.a mgr.x osd.0 mds.a; do
        if pid=$(daemon_pid "$name"); then
            log "$name: pid $pid"
        else
            log "$name: not running"
            ok=1
        fi
    done
    if mds_active; then
        log "MDS of $fs_name active"
    else
        log "MDS of $fs_name not active"
        ok=1
    fi
    return $ok
}

[ $# -ge 1 ] || usage
case "$1" in
    start) start_cluster ;;
    stop) stop_cluster ;;
    status) status ;;
    conf)
        daemon_pid mon.a >/dev/null || die "not running"
        echo "$conf"
        ;;
    stop-mds)
        halt mds.a
        # Tell the monitor at once rather than after the beacon grace (15 s): clients see no
        # active MDS now, and a restarted daemon takes over without waiting.
        cephc mds fail a >/dev/null 2>&1 || true
        ;;
    start-mds)
        daemon_pid mon.a >/dev/null || die "the cluster is not running: use start"
        if ! daemon_pid mds.a >/dev/null; then
            launch ceph-mds mds.a --keyring "$dir/mds/keyring"
        fi
        wait_for "the MDS of $fs_name to become active" mds_active
        ;;
    pids)
        for name in mon.a mgr.x osd.0 mds.a; do
            pid=$(daemon_pid "$name") && echo "$name $pid"
        done
        true
        ;;
    *) usage ;;
esac
