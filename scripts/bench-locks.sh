#!/usr/bin/env bash
# fcntl lock/unlock round trips through the FUSE mount (issue 12): F_SETLK of one byte range and
# its F_UNLCK, one after the other, N times, timed per call, through `eagernfs mount` of eagernfs
# and of nfs-ganesha (its NLM with rpc.statd) on the same ext4, and on the local directory itself
# (the kernel's own locks, no network) as the floor. Server on CPU 1, client and mount daemon on
# CPU 0. Median, p99 and mean per call, with the ratio eagernfs / ganesha.
#
#   scripts/bench-locks.sh [--out DIR] [--count N]
#
# Writes DIR/table.md and DIR/command.txt (default docs/benchmarks/locks-YYYY-MM-DD).
# The binary is $EAGERNFS_BIN if set, else a release build. Needs root and fuse3.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/locks-$(date +%Y-%m-%d)
count=2000
orig_args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --count) count=$2; shift 2 ;;
        -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-locks: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "bench-locks: $*" >&2; }
bin=${EAGERNFS_BIN:-}
if [ -z "$bin" ]; then
    (cd "$repo" && cargo build --release -q -p eagernfs >&2)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
fi
work=$(mktemp -d /var/tmp/eagernfs-locks.XXXXXX)
server_pid=
cleanup() {
    for m in "$work"/mnt-*; do
        [ -d "$m" ] && "$bin" umount "$m" >/dev/null 2>&1 || true
    done
    [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    GANESHA_RUN_DIR=$work/ganesha "$repo/scripts/ganesha.sh" stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$out" "$work/export" "$work/state" "$work/mnt-eagernfs" "$work/mnt-ganesha"
chmod 777 "$work/export"
port=$((20000 + RANDOM % 20000))

# Handoff: a holder on one mount releases a lock another mount's process waits for in F_SETLKW;
# prints "p50 p99 mean" in ms of the time from the release to the waiter having the lock.
cat >"$work/handoff.py" <<'PY'
import fcntl, os, statistics, sys, time
holder_path, waiter_path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(holder_path, os.O_RDWR | os.O_CREAT, 0o644)
go_r, go_w = os.pipe()
back_r, back_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(go_w)
    os.close(back_r)
    fd = os.open(waiter_path, os.O_RDWR)
    for _ in range(n):
        os.read(go_r, 1)
        fcntl.lockf(fd, fcntl.LOCK_EX, 1, 0)
        got = time.monotonic_ns()
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
        os.write(back_w, got.to_bytes(8, "little"))
    os._exit(0)
os.close(go_r)
os.close(back_w)
handoffs = []
for _ in range(n):
    fcntl.lockf(fd, fcntl.LOCK_EX, 1, 0)
    os.write(go_w, b"g")
    time.sleep(0.05)  # the waiter is blocked in F_SETLKW by now (a benchmark, not a test)
    released = time.monotonic_ns()
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
    reply = os.read(back_r, 8)
    if len(reply) != 8:
        sys.exit("the waiter died")
    got = int.from_bytes(reply, "little")
    handoffs.append((got - released) / 1e6)
    time.sleep(0.01)
os.waitpid(pid, 0)
xs = sorted(handoffs)
print(f"{xs[len(xs) // 2]:.2f} {xs[min(len(xs) - 1, int(0.99 * len(xs)))]:.2f} {statistics.fmean(xs):.2f}")
PY

# One file, COUNT lock/unlock pairs; prints "lock_p50 lock_p99 lock_mean unlock_p50 unlock_p99 unlock_mean" in µs.
cat >"$work/locks.py" <<'PY'
import fcntl, os, statistics, sys, time
path, n = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
lock, unlock = [], []
for i in range(n):
    t0 = time.perf_counter_ns()
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, i % 4096)
    t1 = time.perf_counter_ns()
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, i % 4096)
    t2 = time.perf_counter_ns()
    lock.append((t1 - t0) / 1000)
    unlock.append((t2 - t1) / 1000)
os.close(fd)
def p(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]
print(" ".join(f"{v:.1f}" for v in (p(lock, .5), p(lock, .99), statistics.fmean(lock), p(unlock, .5), p(unlock, .99), statistics.fmean(unlock))))
PY

: >"$work/results.tsv"
run() { # name path
    local line
    line=$(taskset -c 0 python3 "$work/locks.py" "$2" "$count")
    log "$1: $line"
    echo -e "$1\t$line" >>"$work/results.tsv"
}

run "local ext4 (kernel locks)" "$work/export/local"

taskset -c 1 "$bin" serve "$work/export" --listen "127.0.0.1:$port" --state-dir "$work/state" -o rw,no_root_squash \
    >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
until grep -q "listening on" "$work/server.out" 2>/dev/null; do
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
done
taskset -c 0 "$bin" mount "nfs://127.0.0.1:$port$work/export" "$work/mnt-eagernfs" -o vers=3
run "eagernfs" "$work/mnt-eagernfs/f"
"$bin" umount "$work/mnt-eagernfs"

# Handoffs between two mounts: with the server's GRANTED callback (rpcbind running, the first
# mount registered) and without (pmapport=1: no portmapper, so the waiter polls).
rpcinfo -p 127.0.0.1 >/dev/null 2>&1 || { setsid rpcbind -f </dev/null >/dev/null 2>&1 & sleep 0.5; }
mkdir -p "$work/mnt-w" "$work/mnt-h"
: >"$work/handoff.tsv"
for mode in "GRANTED callback:" "polling:pmapport=1"; do
    name=${mode%%:*} opts=${mode#*:}
    url="nfs://127.0.0.1:$port$work/export${opts:+?$opts}"
    taskset -c 0 "$bin" mount "$url" "$work/mnt-w" -o vers=3
    taskset -c 0 "$bin" mount "$url" "$work/mnt-h" -o vers=3
    line=$(taskset -c 0 python3 "$work/handoff.py" "$work/mnt-h/h" "$work/mnt-w/h" 30)
    log "handoff, $name: $line"
    echo -e "$name\t$line" >>"$work/handoff.tsv"
    "$bin" umount "$work/mnt-w"
    "$bin" umount "$work/mnt-h"
done
kill -TERM "$server_pid"
wait "$server_pid" || true
server_pid=

gport=$((port + 10))
url=$(GANESHA_NLM=1 GANESHA_RUN_DIR=$work/ganesha taskset -c 1 "$repo/scripts/ganesha.sh" start "$work/export" "$gport" vfs)
taskset -c 0 "$bin" mount "$url" "$work/mnt-ganesha" -o vers=3
run "nfs-ganesha" "$work/mnt-ganesha/f"
"$bin" umount "$work/mnt-ganesha"
GANESHA_RUN_DIR=$work/ganesha "$repo/scripts/ganesha.sh" stop >/dev/null 2>&1 || true

{
    echo "# fcntl lock/unlock round trips, $(date +%Y-%m-%d)"
    echo
    echo "$count pairs of \`F_SETLK\` (1 byte, exclusive) and \`F_UNLCK\` on one file through \`eagernfs mount\`;"
    echo "server on CPU 1, client and mount daemon on CPU 0; µs per call."
    echo
    echo "| target | lock p50 | lock p99 | lock mean | unlock p50 | unlock p99 | unlock mean |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    while IFS=$'\t' read -r name line; do
        # shellcheck disable=SC2086
        set -- $line
        echo "| $name | $1 | $2 | $3 | $4 | $5 | $6 |"
    done <"$work/results.tsv"
    echo
    echo "A blocked F_SETLKW handed the lock by another mount's unlock (30 handoffs; ms from the"
    echo "unlock to the waiter holding the lock):"
    echo
    echo "| eagernfs | p50 ms | p99 ms | mean ms |"
    echo "| --- | ---: | ---: | ---: |"
    while IFS=$'\t' read -r name line; do
        # shellcheck disable=SC2086
        set -- $line
        echo "| $name | $1 | $2 | $3 |"
    done <"$work/handoff.tsv"
    echo
    awk -F'\t' '
        { split($2, v, " "); m[$1] = v[3]; u[$1] = v[6] }
        END { if (m["nfs-ganesha"] > 0) printf "eagernfs / ganesha mean: lock %.2f, unlock %.2f\n", m["eagernfs"] / m["nfs-ganesha"], u["eagernfs"] / u["nfs-ganesha"] }
    ' "$work/results.tsv"
} >"$out/table.md"
echo "scripts/bench-locks.sh ${orig_args[*]}" >"$out/command.txt"
cat "$out/table.md"
