#!/usr/bin/env bash
# The soak of issue 20: several eagernfs heads on the test cluster's CephFS, clients writing,
# reading back and locking through every head, and in every round one head killed with kill -9
# in the middle of the work and taken over by a new process with its node id and address.
#
#   scripts/cluster-soak.sh [--heads 3] [--clients 8] [--rounds 100] [--out DIR]
#                           [--round-seconds 10] [--kill-at 3] [--grace 5] [--hold-ms 300]
#                           [--server eagernfs|ganesha] [--libnfs-verifier on|off]
#
# Clients: odd ones are `eagernfs mount`s (FUSE, hard mounts; and a second process per mount
# taking fcntl locks on one shared file),
# even ones libnfs (tests/clients/soakclient.c, built here with cc against libnfs-dev); client i
# uses head ((i-1) mod heads)+1. Every second one of each kind commits with fsync/COMMIT every
# 4 writes, the others write O_SYNC (FILE_SYNC). Round r kills head ((r-1) mod heads)+1 at
# --kill-at seconds and restarts it (scripts/heads.sh restart); after the round every client's
# file is read back through another head and checked against the client's log of acknowledged
# writes. Per round and client (scripts/cluster-soak-report.py): the time from the kill to the
# client's first successful call after it, ESTALE errors, committed bytes lost, the writes
# acknowledged but not yet committed at the kill and whether they are there afterwards, lock
# holds and double grants (two clients holding the lock at one instant, by their own clocks:
# one machine, one clock).
#
# The libnfs clients that fsync every 4 writes write UNSTABLE (libnfs 4.0 sends UNSTABLE unless
# the file is open O_SYNC: lib/nfs_v3.c, nfs3_fill_WRITE3args). NFSv3 (RFC 1813) leaves such data
# to the client until a COMMIT covers it: a COMMIT verifier that differs from a WRITE's (a head
# restarted) means "write it again". libnfs 4.0's nfs_fsync never compares verifiers
# (nfs3_pwrite_mcb ignores WRITE3resok.verf, nfs3_fsync_cb only checks the status), so with it
# the writes a killed head acknowledged just before the kill are lost although the next fsync
# succeeds: a client bug, not the server's. --libnfs-verifier on (the default) has soakclient
# follow the rule itself through libnfs's raw RPC layer (resent blocks: column resent_bytes);
# off runs libnfs's plain nfs_pwrite/nfs_fsync to show what a libnfs 4.0 application gets. The
# README says which ran. (The mounts need nothing of the kind: eagernfs's client resends on a
# verifier change itself, crates/client/src/cache/mod.rs.)
#
# Out: DIR/rounds.tsv.gz (a row per round and client), DIR/README.md (command, summary table),
# DIR/heads-logs.tar.gz and the raw logs of rounds that found a failure (failed-rounds.tar.xz). DIR defaults to
# docs/benchmarks/cluster-soak-YYYY-MM-DD (cluster-soak-ganesha-YYYY-MM-DD).
#
# --server ganesha: the same with nfs-ganesha 4.3 (FSAL_CEPH, the rados_cluster recovery backend)
# in the place of the heads (scripts/ganesha-heads.sh), for a comparison; without locks (its
# NLM needs the machine's one rpcbind and rpc.statd, see that script), mounts with nolock.
#
# Uses its own test cluster, addresses and ports unless told otherwise (environment):
#   CEPH_CLUSTER_DIR (target/ceph-soak), CEPH_MON_PORT (47389), CEPH_PORT_MIN (47400) — started
#   here if not running, and then stopped at the end; HEADS_ADDR_BASE (127.0.3.10),
#   HEADS_PORT (47520); EAGERNFS (the binary; default target/release, else target/debug).
# Everything it started (mounts, heads, the cluster, clients) is stopped on exit, also on ^C.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
heads=3 clients=8 rounds=100 out="" round_s=10 kill_at=3 grace=5 hold_ms=300 server=eagernfs
libnfs_verifier=on
while [ $# -gt 0 ]; do
    case $1 in
    --heads) heads=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --round-seconds) round_s=$2; shift 2 ;;
    --kill-at) kill_at=$2; shift 2 ;;
    --grace) grace=$2; shift 2 ;;
    --hold-ms) hold_ms=$2; shift 2 ;;
    --server) server=$2; shift 2 ;;
    --libnfs-verifier) libnfs_verifier=$2; shift 2 ;;
    *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
for v in heads clients rounds round_s kill_at grace hold_ms; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "cluster-soak.sh: --${v//_/-} takes a whole number" >&2; exit 2; }
done
[ "$heads" -ge 2 ] && [ "$heads" -le 9 ] || { echo "cluster-soak.sh: --heads 2..9" >&2; exit 2; }
[ "$clients" -ge 1 ] && [ "$clients" -le 64 ] || { echo "cluster-soak.sh: --clients 1..64" >&2; exit 2; }
[ "$rounds" -ge 1 ] && [ "$rounds" -le 10000 ] || { echo "cluster-soak.sh: --rounds 1..10000" >&2; exit 2; }
[ "$kill_at" -lt "$round_s" ] || { echo "cluster-soak.sh: --kill-at must be less than --round-seconds" >&2; exit 2; }
case $libnfs_verifier in
on) export SOAK_LIBNFS_VERIFIER=1 ;;
off) export SOAK_LIBNFS_VERIFIER=0 ;;
*) echo "cluster-soak.sh: --libnfs-verifier on or off" >&2; exit 2 ;;
esac

case $server in
eagernfs) heads_sh=$root/scripts/heads.sh suffix="" mount_opts=hard,vers=3 locks=1 mnt_port_off=0 ;;
ganesha) heads_sh=$root/scripts/ganesha-heads.sh suffix=-ganesha mount_opts=hard,nolock,vers=3 locks=0 mnt_port_off=1 ;;
*) echo "cluster-soak.sh: --server eagernfs or ganesha" >&2; exit 2 ;;
esac
out=${out:-$root/docs/benchmarks/cluster-soak$suffix-$(date -u +%F)}
export CEPH_CLUSTER_DIR=${CEPH_CLUSTER_DIR:-$root/target/ceph-soak}
export CEPH_MON_PORT=${CEPH_MON_PORT:-47389} CEPH_PORT_MIN=${CEPH_PORT_MIN:-47400}
export HEADS_ADDR_BASE=${HEADS_ADDR_BASE:-127.0.3.10} HEADS_PORT=${HEADS_PORT:-47520}
export HEADS_GRACE=$grace HEADS_NAMESPACE=soak-$$-$(date +%s)
bin=${EAGERNFS:-}
if [ -z "$bin" ]; then
    for b in "$root/target/release/eagernfs" "$root/target/debug/eagernfs"; do
        [ -x "$b" ] && { bin=$b; break; }
    done
fi
[ -x "${bin:-}" ] || { echo "cluster-soak.sh: no eagernfs binary: cargo build --release -p eagernfs-cli, or set EAGERNFS" >&2; exit 1; }
export EAGERNFS=$bin

log() { echo "cluster-soak.sh: $(date -u +%T) $*" >&2; }
now_ms() { date +%s%3N; }

work=$(mktemp -d /tmp/cluster-soak.XXXXXX)
export HEADS_DIR=$work/heads
started_cluster=0
mounts=()
client_pids=()
cleanup() {
    local rc=$? p m
    trap - EXIT INT TERM
    # client_pids are `timeout` processes: SIGTERM is relayed to the client (SIGKILL would not be).
    for p in "${client_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${client_pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        pkill -KILL -P "$p" 2>/dev/null || true
    done
    for m in "${mounts[@]}"; do
        timeout 60 "$bin" umount "$m" 2>/dev/null || timeout 10 "$bin" umount -z "$m" 2>/dev/null || true
    done
    "$heads_sh" stop 2>/dev/null || true
    # The heads' logs, whatever ended the run (the evidence of a failure).
    [ -d "$out" ] && [ -s "${rows:-}" ] && gzip -9c "$rows" >"$out/rounds.tsv.gz" || true
    [ -d "$out" ] && [ -d "$HEADS_DIR" ] && tar -C "$HEADS_DIR" -czf "$out/heads-logs.tar.gz" --exclude=state . 2>/dev/null || true
    if [ "$started_cluster" = 1 ]; then "$root/scripts/ceph-cluster.sh" stop >/dev/null 2>&1 || true; fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The libnfs client.
if ! [ -e /usr/include/nfsc/libnfs.h ]; then
    log "installing libnfs-dev"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends libnfs-dev >&2
fi
cc -O2 -Wall -o "$work/soakclient" "$root/tests/clients/soakclient.c" -lnfs
sc=$work/soakclient

# The cluster (ours unless one answers in CEPH_CLUSTER_DIR already).
if ! "$root/scripts/ceph-cluster.sh" status >/dev/null 2>&1; then
    log "starting the test cluster in $CEPH_CLUSTER_DIR"
    started_cluster=1
    "$root/scripts/ceph-cluster.sh" start >/dev/null
fi
"$heads_sh" start "$heads" >&2
addr() { echo "${HEADS_ADDR_BASE%.*}.$((${HEADS_ADDR_BASE##*.} + $1))"; }
head_of() { echo $((($1 - 1) % heads + 1)); }
nfs_url() { echo "nfs://$(addr "$1")/?nfsport=$HEADS_PORT&mountport=$((HEADS_PORT + mnt_port_off))&version=3"; }

# Odd clients are mounts, each of its own head's address.
for i in $(seq "$clients"); do
    [ $((i % 2)) = 1 ] || continue
    m=$work/mnt/$i
    mkdir -p "$m"
    "$bin" mount "nfs://$(addr "$(head_of "$i")"):$HEADS_PORT/" "$m" -o "$mount_opts,mountport=$((HEADS_PORT + mnt_port_off))" >&2
    mounts+=("$m")
done
first_mount=${mounts[0]:-}
dir=soak-$HEADS_NAMESPACE
if [ -n "$first_mount" ]; then
    mkdir "$first_mount/$dir"
    : >"$first_mount/$dir/lock"
else
    echo "cluster-soak.sh: at least one client must be a mount (clients >= 1)" >&2
    exit 2
fi

mkdir -p "$out" "$work/rounds"
rm -rf "$out"/failed-round-* "$out/failures.txt"
rows=$work/rows.tsv
python3 "$root/scripts/cluster-soak-report.py" header >"$rows"
log "$server: $heads heads on $HEADS_ADDR_BASE+N:$HEADS_PORT, $clients clients, $rounds rounds of $round_s s (kill at $kill_at s, grace $grace s), libnfs verifier rule $libnfs_verifier; work dir $work"
failed_rounds=0
for r in $(seq "$rounds"); do
    rd=$work/rounds/$r
    mkdir -p "$rd"
    victim=$(( (r - 1) % heads + 1 ))
    client_pids=()
    for i in $(seq "$clients"); do
        h=$(head_of "$i")
        fsync_every=$(( (i + 1) / 2 % 2 == 1 ? 4 : 0 ))
        file=$dir/r$r-c$i.dat
        if [ $((i % 2)) = 1 ]; then
            kind=mount
            timeout -s KILL $((round_s + 120)) "$sc" posix "$work/mnt/$i/$file" - "$i" \
                "$round_s" "$fsync_every" 0 "$rd/c$i.log" 2>"$rd/c$i.err" &
            if [ "$locks" = 1 ]; then
            client_pids+=($!)
            # Its locks in a process of their own: a lock refused during a grace period (NFSv3's
            # rule) must not hold up the data calls.
            timeout -s KILL $((round_s + 120)) "$sc" posix - "$work/mnt/$i/$dir/lock" "$i" \
                "$round_s" 0 "$hold_ms" "$rd/c$i.lock.log" 2>>"$rd/c$i.err" &
            fi
        else
            kind=libnfs
            timeout -s KILL $((round_s + 120)) "$sc" nfs "$(nfs_url "$h")" "$file" "$i" "$round_s" "$fsync_every" \
                "$rd/c$i.log" 2>"$rd/c$i.err" &
        fi
        client_pids+=($!)
        echo "$i $kind $h $fsync_every $file" >>"$rd/clients"
    done
    sleep "$kill_at"
    # Just before and just after the kill: resume times count from the first (an overestimate
    # by a few ms), "acknowledged before the kill" means before the second.
    kill_ms=$(now_ms)
    "$heads_sh" kill "$victim" >/dev/null
    killed_ms=$(now_ms)
    "$heads_sh" restart "$victim" >/dev/null
    listen_ms=$(now_ms)
    echo "$r $victim $kill_ms $killed_ms $listen_ms" >"$rd/round"
    for p in "${client_pids[@]}"; do wait "$p" || echo "client pid $p exit $?" >>"$rd/client-exits"; done
    client_pids=()
    # Read every client's file back through the next head.
    while read -r i kind h fsync_every file; do
        "$sc" verify "$(nfs_url $((h % heads + 1)))" "$file" "$i" "$rd/c$i.log" >"$rd/c$i.verify" 2>>"$rd/c$i.err" ||
            echo "verify failed" >>"$rd/c$i.err"
    done <"$rd/clients"
    python3 "$root/scripts/cluster-soak-report.py" round "$rd" >>"$rows"
    if ! python3 "$root/scripts/cluster-soak-report.py" clean "$rd"; then
        failed_rounds=$((failed_rounds + 1))
        cp -r "$rd" "$out/failed-round-$r"
        "$heads_sh" status >"$out/failed-round-$r/heads-status"
    fi
    # The round's files go, through the first mount. A refusal is a finding, not the end of the
    # run: it is recorded (failures.txt, the round's logs kept) and retried for up to 60 s.
    t0=$(now_ms) tries=0
    until rm -f "$first_mount/$dir"/r"$r"-c*.dat 2>"$rd/rm.err"; do
        tries=$((tries + 1))
        [ "$tries" = 1 ] && echo "round $r: rm of the round's files through mount 1 (head 1) failed: $(sort -u "$rd/rm.err" | sed 's/.*: //' | sort | uniq -c | tr -s ' \n' ' ')" >>"$out/failures.txt"
        [ $(( $(now_ms) - t0 )) -lt 60000 ] || break
        sleep 1
    done
    if [ "$tries" -gt 0 ]; then
        echo "round $r: rm ... $( [ -s "$rd/rm.err" ] && echo "still failing" || echo "succeeded") after $(( $(now_ms) - t0 )) ms, $tries failed tries" >>"$out/failures.txt"
        [ -d "$out/failed-round-$r" ] || cp -r "$rd" "$out/failed-round-$r"
        cp "$rd/rm.err" "$out/failed-round-$r/" 2>/dev/null || true
    fi
    log "round $r/$rounds: killed head $victim, new head listening $((listen_ms - kill_ms)) ms later; $(tail -n +2 "$rows" | awk -F'\t' -v r="$r" '$1==r' | python3 "$root/scripts/cluster-soak-report.py" brief)"
done

gzip -9c "$rows" >"$out/rounds.tsv.gz"
if ls -d "$out"/failed-round-* >/dev/null 2>&1; then
    (cd "$out" && tar -cJf failed-rounds.tar.xz failed-round-* && rm -rf failed-round-*)
fi
python3 "$root/scripts/cluster-soak-report.py" summary "$rows" \
    "scripts/cluster-soak.sh --server $server --heads $heads --clients $clients --rounds $rounds --round-seconds $round_s --kill-at $kill_at --grace $grace --hold-ms $hold_ms --libnfs-verifier $libnfs_verifier" \
    "$failed_rounds" "$libnfs_verifier" >"$out/README.md"
log "done: $out/README.md ($failed_rounds rounds with a failure)"
cat "$out/README.md"
