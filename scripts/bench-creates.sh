#!/usr/bin/env bash
# A million CREATEs in one server run (issue 8, point 4): `eagernfs bench load` with a
# CREATE-only mix, closed loop, 16 clients (each in its own directory), against one eagernfs
# serving a directory. Reports creates done and their rate, errors, the server's peak memory
# (VmHWM) and its open descriptors before and after (a leak shows as growth), and the files on
# disk. nfs-ganesha 4.3 is not run: it wedges after ~24k creates here ("FD Hard Limit
# Exceeded", then JUKEBOX for every CREATE until restarted).
#
#   scripts/bench-creates.sh [--out DIR] [--creates N] [--max-seconds S]
#
# Writes DIR/summary.txt (default docs/benchmarks/creates-YYYY-MM-DD). Server on CPU 1, client
# on CPU 0. The binary is $EAGERNFS_BIN if set, else a release build.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/creates-$(date +%Y-%m-%d)
creates=1000000
max_seconds=1200
orig_args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --creates) creates=$2; shift 2 ;;
        --max-seconds) max_seconds=$2; shift 2 ;;
        -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-creates: unknown argument $1" >&2; exit 2 ;;
    esac
done
bin=${EAGERNFS_BIN:-}
if [ -z "$bin" ]; then
    (cd "$repo" && cargo build --release -q -p eagernfs >&2)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
fi
work=$(mktemp -d /var/tmp/eagernfs-creates.XXXXXX)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$out" "$work/export" "$work/state"
port=$((20000 + RANDOM % 20000))
taskset -c 1 "$bin" serve "$work/export" --listen "127.0.0.1:$port" --state-dir "$work/state" \
    -o rw,insecure,no_root_squash >"$work/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 300); do grep -q listening "$work/serve.log" && break; sleep 0.1; done
fds() { ls "/proc/$server_pid/fd" | wc -l; }
fds_before=$(fds)
start=$SECONDS
taskset -c 0 "$bin" bench load "nfs://127.0.0.1:$port$work/export" --mix CREATE=1 --closed-loop 8 \
    --clients 16 --max-ops "$creates" --step-ops "$creates" --step-seconds "$max_seconds" \
    --max-seconds "$max_seconds" --no-progress --label creates \
    >"$work/load.txt" 2>&1 || true
elapsed=$((SECONDS - start))
fds_after=$(fds)
hwm=$(grep VmHWM "/proc/$server_pid/status" | awk '{print $2, $3}')
rss=$(grep VmRSS "/proc/$server_pid/status" | awk '{print $2, $3}')
# The load removes what it created when it ends: what is left is the file set.
files=$(find "$work/export" -type f | wc -l)
kill -TERM "$server_pid"
wait "$server_pid" || true
server_pid=
{
    echo "scripts/bench-creates.sh ${orig_args[*]}"
    echo "eagernfs $("$bin" --version | head -1) · $(uname -r) · $(nproc) CPUs · $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    cat "$work/load.txt"
    echo
    echo "files on disk after the run: $files (in $elapsed s)"
    echo "server peak memory (VmHWM): $hwm · at the end (VmRSS): $rss"
    echo "server descriptors: $fds_before before, $fds_after after the run"
    echo "server errors logged: $(grep -c -E 'ERROR|WARN' "$work/serve.log" || true)"
} | tee "$out/summary.txt"
