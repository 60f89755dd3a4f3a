#!/usr/bin/env bash
# Small random I/O from an independent client (issue 11): 8 KiB random READ and WRITE with
# libnfs (tests/clients/nfsiops.c), 1 and 16 clients (queue depth 1 and 16, one call in flight
# per connection), against eagernfs serving a directory and nfs-ganesha (FSAL VFS) on the same
# ext4, server on CPU 1 and client on CPU 0. IOPS, and the server's CPU time per operation from
# /proc/PID/stat (user + system), with ratios eagernfs / ganesha.
#
#   scripts/bench-iops.sh [--out DIR] [--seconds S] [--file-size SIZE_MIB]
#
# Writes DIR/table.md and DIR/command.txt (default docs/benchmarks/iops-YYYY-MM-DD).
# The binary is $EAGERNFS_BIN if set, else a release build.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/iops-$(date +%Y-%m-%d)
seconds=10
file_mib=256
orig_args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --file-size) file_mib=$2; shift 2 ;;
        -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-iops: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "bench-iops: $*" >&2; }
bin=${EAGERNFS_BIN:-}
if [ -z "$bin" ]; then
    (cd "$repo" && cargo build --release -q -p eagernfs >&2)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
fi
work=$(mktemp -d /var/tmp/eagernfs-iops.XXXXXX)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    GANESHA_RUN_DIR=$work/ganesha "$repo/scripts/ganesha.sh" stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$out" "$work/export" "$work/state"
# shellcheck disable=SC2046
cc -O2 -Wall -o "$work/nfsiops" "$repo/tests/clients/nfsiops.c" $(pkg-config --cflags --libs libnfs) -lpthread
port=$((20000 + RANDOM % 20000))

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

: >"$work/results.tsv"
measure() { # name url pid
    local name=$1 url=$2 pid=$3
    for mode in read write; do
        for clients in 1 16; do
            local before after line
            before=$(cpu_ticks "$pid")
            line=$(taskset -c 0 "$work/nfsiops" "$url" data "$mode" "$seconds" "$clients")
            after=$(cpu_ticks "$pid")
            log "$name $mode x$clients: $line, server CPU $((after - before)) ticks"
            echo -e "$name\t$mode\t$clients\t$line\t$((after - before))" >>"$work/results.tsv"
        done
    done
}

# The file to read and overwrite, written locally before either server starts.
head -c "$((file_mib << 20))" /dev/urandom >"$work/export/data"
sync

taskset -c 1 "$bin" serve "$work/export" --listen "127.0.0.1:$port" --state-dir "$work/state" \
    -o rw,insecure,no_root_squash >"$work/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 300); do grep -q listening "$work/serve.log" && break; sleep 0.1; done
measure eagernfs "nfs://127.0.0.1$work/export?nfsport=$port&mountport=$port" "$server_pid"
kill -TERM "$server_pid"; wait "$server_pid" || true; server_pid=

gurl=$(GANESHA_RUN_DIR=$work/ganesha taskset -c 1 "$repo/scripts/ganesha.sh" start "$work/export" "$((port + 2))" vfs)
gpid=$(pgrep -f "ganesha.nfsd -F -f $work/ganesha" | head -1)
measure ganesha "${gurl%/}" "$gpid"
GANESHA_RUN_DIR=$work/ganesha "$repo/scripts/ganesha.sh" stop >/dev/null

python3 - "$work/results.tsv" "$hz" "$seconds" >"$out/table.md" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
hz = int(sys.argv[2])
res = {}
for name, mode, clients, line, ticks in rows:
    kv = dict(p.split("=") for p in line.split())
    ops = int(kv["ops"])
    res[(name, mode, int(clients))] = (float(kv["iops"]), int(ticks) / hz * 1e6 / max(ops, 1))
print(f"8 KiB random I/O from libnfs (nfsiops), {sys.argv[3]} s per cell; server CPU per operation from /proc/PID/stat.\n")
print("| workload | eagernfs IOPS | ganesha IOPS | ratio | eagernfs CPU µs/op | ganesha CPU µs/op | ratio |")
print("|---|---:|---:|---:|---:|---:|---:|")
for mode in ["read", "write"]:
    for clients in [1, 16]:
        e, g = res.get(("eagernfs", mode, clients)), res.get(("ganesha", mode, clients))
        if not e or not g:
            continue
        print(f"| {mode.upper()} QD{clients} | {e[0]:.0f} | {g[0]:.0f} | {e[0] / g[0]:.2f} | {e[1]:.1f} | {g[1]:.1f} | {e[1] / g[1]:.2f} |")
EOF
{
    echo "scripts/bench-iops.sh ${orig_args[*]}"
    echo "eagernfs $("$bin" --version | head -1) · $(uname -r) · $(nproc) CPUs · $(date -u +%Y-%m-%dT%H:%MZ)"
} >"$out/command.txt"
cat "$out/table.md"
