#!/usr/bin/env bash
# Runs nfs-ganesha as the reference NFSv3 server for our tests and benchmarks.
#
#   scripts/ganesha.sh start DIR PORT [vfs|mem|ceph]  start (or restart) serving DIR; prints the URL
#                                                 (ceph: DIR is a path of a CephFS, FSAL_CEPH)
#   scripts/ganesha.sh stop                       stop the instance of this run dir
#   scripts/ganesha.sh status                     exit 0 if the instance answers NFS
#
# Environment (all optional):
#   GANESHA_RUN_DIR    config, pid file and logs             (default /tmp/eagernfs-ganesha)
#   GANESHA_MNT_PORT   MOUNT port                            (default PORT+1, see below)
#   GANESHA_ACCESS     RW or RO                              (default RW)
#   GANESHA_SQUASH     No_Root_Squash, Root_Squash, All_Squash (default No_Root_Squash)
#   GANESHA_TIMEOUT_S  how long to wait for readiness / exit (default 30)
#   GANESHA_NLM        1: serve byte-range locks (NLM, registered with rpcbind; ganesha then
#                      needs rpc.statd from nfs-common, started here if not running) (default 0)
#   GANESHA_NLM_PORT   NLM port                              (default PORT+2)
#   GANESHA_NFS4       1: serve NFSv4.1 and 4.2 too (same port; pseudo path = DIR) (default 0);
#                      only: NFSv4.1 and 4.2 alone (Protocols = 4: no MOUNT, no NFSv3)
#   GANESHA_LEASE_S    NFSv4 lease time in seconds            (default 90)
#   GANESHA_CEPH_CONF  with ceph: the cluster's ceph.conf    (default /etc/ceph/ceph.conf)
#   GANESHA_CEPH_FS    with ceph: the file system            (default cephfs)
#   GANESHA_CEPH_USER  with ceph: the cephx client id        (default admin)
#
# Why MOUNT gets its own port: ganesha 4.3 accepts MNT_Port == NFS_Port in its config but then
# answers MOUNT calls on that socket with PROG_UNAVAIL ("Invalid Program number 100005"), so
# libnfs cannot mount. Two ports work. The URL printed on stdout names both ports, so clients
# never depend on rpcbind (see scripts/README.md for the libnfs URL findings).
#
# Exactly one line goes to stdout on a successful start: the libnfs URL of the export root,
#   nfs://127.0.0.1/ABS/DIR/?nfsport=PORT&mountport=MNT_PORT
# Everything else goes to stderr.
set -euo pipefail

run_dir=${GANESHA_RUN_DIR:-/tmp/eagernfs-ganesha}
timeout_s=${GANESHA_TIMEOUT_S:-30}

log() { echo "ganesha.sh: $*" >&2; }
die() {
    log "$*"
    exit 1
}

usage() {
    sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# Seconds since the epoch with sub-second precision, for deadlines.
now_s() { date +%s.%N; }
before() { awk -v a="$(now_s)" -v b="$1" 'BEGIN { exit !(a < b) }'; }
deadline_in() { awk -v a="$(now_s)" -v d="$1" 'BEGIN { printf "%.3f", a + d }'; }

ensure_rpcbind() {
    # ganesha registers its programs with rpcbind at start-up and logs errors without it.
    if rpcinfo -p 127.0.0.1 >/dev/null 2>&1; then
        return 0
    fi
    command -v rpcbind >/dev/null || die "rpcbind not installed (run scripts/install-deps.sh)"
    mkdir -p "$run_dir"
    log "starting rpcbind"
    # Debian's rpcbind aborts when given -h, so it listens on its defaults; -f keeps it in the
    # foreground so it stays our child's child instead of racing a daemonising fork.
    setsid rpcbind -f </dev/null >"$run_dir/rpcbind.log" 2>&1 &
    local deadline
    deadline=$(deadline_in 10)
    while ! rpcinfo -p 127.0.0.1 >/dev/null 2>&1; do
        before "$deadline" || die "rpcbind did not answer within 10 s: $(tail -5 "$run_dir/rpcbind.log")"
        sleep 0.1
    done
}

ensure_statd() {
    # ganesha's lock manager asks the host's status monitor to watch each client (SM_MON) and
    # refuses locks (NLM4_DENIED_NOLOCKS) when it cannot reach one.
    if rpcinfo -T tcp 127.0.0.1 100024 1 >/dev/null 2>&1; then
        return 0
    fi
    command -v rpc.statd >/dev/null || die "rpc.statd not installed (apt-get install nfs-common)"
    mkdir -p "$run_dir"
    log "starting rpc.statd"
    setsid rpc.statd -F </dev/null >"$run_dir/statd.log" 2>&1 &
    local deadline
    deadline=$(deadline_in 10)
    while ! rpcinfo -T tcp 127.0.0.1 100024 1 >/dev/null 2>&1; do
        before "$deadline" || die "rpc.statd did not register within 10 s: $(tail -5 "$run_dir/statd.log")"
        sleep 0.1
    done
}

ganesha_pid() {
    local pid
    [ -f "$run_dir/launcher.pid" ] || return 1
    pid=$(cat "$run_dir/launcher.pid")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

stop() {
    local pid deadline
    if ! pid=$(ganesha_pid); then
        rm -f "$run_dir/launcher.pid"
        return 0
    fi
    log "stopping ganesha (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$(deadline_in "$timeout_s")
    while kill -0 "$pid" 2>/dev/null; do
        if ! before "$deadline"; then
            log "ganesha ignored SIGTERM for ${timeout_s} s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
    done
    # A killed ganesha cannot be reaped by us (it was started by an earlier invocation), so wait
    # for the kernel to tear it down before the ports are reused.
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    rm -f "$run_dir/launcher.pid"
}

url_for() {
    local dir=$1 port=$2 mnt_port=$3
    echo "nfs://127.0.0.1${dir%/}/?nfsport=${port}&mountport=${mnt_port}"
}

start() {
    [ $# -ge 2 ] || usage
    local dir port fsal mnt_port access squash pid deadline url fsal_block ceph_block=""
    port=$2
    fsal=${3:-vfs}
    if [ "$fsal" = ceph ]; then
        # A path of the CephFS, not of this machine.
        dir=$1
        [[ "$dir" == /* ]] || die "with ceph, DIR is an absolute path of the CephFS, not $dir"
    else
        dir=$(realpath -e "$1") || die "no such directory: $1"
        [ -d "$dir" ] || die "not a directory: $dir"
    fi
    case "$fsal" in
        vfs) fsal=VFS; fsal_block="FSAL { Name = VFS; }" ;;
        mem) fsal=MEM; fsal_block="FSAL { Name = MEM; }" ;;
        ceph)
            fsal=CEPH
            fsal_block="FSAL { Name = CEPH; Filesystem = \"${GANESHA_CEPH_FS:-cephfs}\"; User_Id = \"${GANESHA_CEPH_USER:-admin}\"; }"
            ceph_block="CEPH { Ceph_Conf = \"${GANESHA_CEPH_CONF:-/etc/ceph/ceph.conf}\"; }"
            dpkg-query -W -f='${Status}' nfs-ganesha-ceph 2>/dev/null | grep -q 'install ok installed' ||
                die "FSAL_CEPH needs the package nfs-ganesha-ceph (scripts/ceph-cluster.sh start installs it)"
            ;;
        *) die "FSAL must be vfs, mem or ceph, not $fsal" ;;
    esac
    [[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -gt 0 ] && [ "$port" -lt 65535 ] || die "bad port: $port"
    mnt_port=${GANESHA_MNT_PORT:-$((port + 1))}
    [ "$mnt_port" != "$port" ] || die "MOUNT port must differ from NFS port (ganesha 4.3 limitation)"
    access=${GANESHA_ACCESS:-RW}
    local nlm=false nlm_port=""
    if [ "${GANESHA_NLM:-0}" = 1 ]; then
        nlm=true
        nlm_port=$'\n'"    NLM_Port = ${GANESHA_NLM_PORT:-$((port + 2))};"
    fi
    squash=${GANESHA_SQUASH:-No_Root_Squash}
    local protocols=3 v4conf=""
    case "${GANESHA_NFS4:-0}" in
        0) ;;
        1) protocols="3, 4" ;;
        only) protocols=4 ;;
        *) die "GANESHA_NFS4 must be 0, 1 or only, not ${GANESHA_NFS4}" ;;
    esac
    if [ "$protocols" != 3 ]; then
        v4conf=$'\n'"    Minor_Versions = 1, 2;"$'\n'"    Lease_Lifetime = ${GANESHA_LEASE_S:-90};"
    fi
    command -v ganesha.nfsd >/dev/null || die "ganesha.nfsd not installed (run scripts/install-deps.sh)"
    command -v nfs-ls >/dev/null || die "nfs-ls not installed (run scripts/install-deps.sh)"

    stop
    ensure_rpcbind
    [ "$nlm" = false ] || ensure_statd
    mkdir -p "$run_dir/recovery" /var/run/ganesha
    local plugins
    plugins=$(dirname "$(dpkg -L nfs-ganesha-vfs 2>/dev/null | grep -m1 'libfsalvfs.so$' || echo /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so)")

    cat >"$run_dir/ganesha.conf" <<CONF
# Generated by scripts/ganesha.sh; edits are overwritten on the next start.
NFS_CORE_PARAM {
    Protocols = ${protocols};
    NFS_Port = ${port};
    MNT_Port = ${mnt_port};
    Bind_Addr = 127.0.0.1;
    Enable_NLM = ${nlm};${nlm_port}
    Enable_RQUOTA = false;
    Enable_UDP = false;
    Plugins_Dir = "${plugins}";
}
NFSV4 {
    # A fresh instance per run: the 90 s grace period would only delay start-up.
    Graceless = true;
    RecoveryRoot = "${run_dir}/recovery";${v4conf}
}
EXPORT {
    Export_Id = 1;
    Path = "${dir}";
    Pseudo = "${dir}";
    Access_Type = ${access};
    Squash = ${squash};
    Anonymous_Uid = 65534;
    Anonymous_Gid = 65534;
    Protocols = ${protocols};
    Transports = TCP;
    SecType = sys;
    ${fsal_block}
}
${ceph_block}
CONF

    : >"$run_dir/ganesha.log"
    # -F keeps ganesha in the foreground so $! is its pid; setsid detaches it from our session
    # and the redirections make sure no caller's pipe is held open by the daemon.
    setsid ganesha.nfsd -F -f "$run_dir/ganesha.conf" -L "$run_dir/ganesha.log" \
        -p "$run_dir/ganesha.pid" -N NIV_EVENT </dev/null >"$run_dir/ganesha.out" 2>&1 &
    pid=$!
    echo "$pid" >"$run_dir/launcher.pid"

    url=$(url_for "$dir" "$port" "$mnt_port")
    deadline=$(deadline_in "$timeout_s")
    # Poll the real client against the real export: only a successful MOUNT + READDIR proves
    # that both ports are bound and the export is loaded. Without NFSv3 (GANESHA_NFS4=only)
    # there is no MOUNT to ask: NFSv4's NULL on the NFS port (rpcinfo at the universal address,
    # not through rpcbind) says it serves.
    ready() {
        if [ "$protocols" = 4 ]; then
            timeout 5 rpcinfo -a "127.0.0.1.$((port / 256)).$((port % 256))" -T tcp 100003 4 >/dev/null 2>&1
        else
            timeout 5 nfs-ls "$url" >/dev/null 2>&1
        fi
    }
    until ready; do
        if ! kill -0 "$pid" 2>/dev/null; then
            log "ganesha exited during start-up; log tail:"
            tail -20 "$run_dir/ganesha.log" "$run_dir/ganesha.out" >&2 || true
            rm -f "$run_dir/launcher.pid"
            exit 1
        fi
        if ! before "$deadline"; then
            log "ganesha did not answer on $url within ${timeout_s} s; log tail:"
            tail -20 "$run_dir/ganesha.log" >&2 || true
            stop
            exit 1
        fi
        sleep 0.2
    done
    log "ganesha (pid $pid, FSAL $fsal) serves $dir on 127.0.0.1:$port (mount $mnt_port)"
    echo "$url"
}

status() {
    local pid
    pid=$(ganesha_pid) || die "not running (run dir $run_dir)"
    log "running, pid $pid"
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case "$cmd" in
    start) start "$@" ;;
    stop) stop ;;
    status) status ;;
    *) usage ;;
esac
