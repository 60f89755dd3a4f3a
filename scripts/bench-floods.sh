#!/usr/bin/env bash
# A well-behaved client's latency while other clients misbehave (issue 8, point 3).
# For each flood of scripts/flood.py (connections, many-hosts, slowloris, oversized, churn,
# blast), and once with no flood, `eagernfs bench load` runs the SFS mix at a modest rate from
# 4 clients and reports its p99; the server's own counters say what it dropped and why.
# Server on CPU 1; the flood and the well-behaved client share CPU 0.
#
#   scripts/bench-floods.sh [--out DIR] [--connections N] [--seconds S] [--rate R]
#
#   --connections N   sockets per flood (default 10000; the server raises RLIMIT_NOFILE itself)
#   --seconds S       how long each flood and each measurement runs (default 15)
#   --rate R          the well-behaved clients' offered calls/s (default 400)
#
# Writes DIR/table.md and DIR/summary.txt (default docs/benchmarks/floods-YYYY-MM-DD).
# The binary is $EAGERNFS_BIN if set, else a release build.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/floods-$(date +%Y-%m-%d)
connections=10000
seconds=15
rate=400
orig_args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-floods: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "bench-floods: $*" >&2; }

bin=${EAGERNFS_BIN:-}
if [ -z "$bin" ]; then
    (cd "$repo" && cargo build --release -q -p eagernfs >&2)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

work=$(mktemp -d /var/tmp/eagernfs-floods.XXXXXX)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$out" "$work/export" "$work/state"
port=$((20000 + RANDOM % 20000))
# The defaults, except a record timeout short enough to act within one measurement.
taskset -c 1 "$bin" serve "$work/export" --listen "127.0.0.1:$port" --state-dir "$work/state" \
    -o rw,insecure,no_root_squash --max-connections 20000 --record-timeout 5 >"$work/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 300); do grep -q listening "$work/serve.log" && break; sleep 0.1; done
nofile=$(grep -o "open-file limit [0-9]*" "$work/serve.log" | head -1)
url="nfs://127.0.0.1:$port$work/export"

stat_json() { "$bin" stat --json --state-dir "$work/state"; }

: >"$out/summary.txt"
{
    echo "| flood | flood result | well-behaved p50 | p99 | achieved calls/s | errors | server dropped (host limit / slow / idle) |"
    echo "|---|---|---:|---:|---:|---:|---|"
} >"$work/table.md"
for mode in none connections many-hosts slowloris oversized churn blast; do
    stat_json >"$work/before.json"
    flood_out=$work/flood-$mode.txt
    if [ "$mode" != none ]; then
        log "$mode: $connections sockets for $seconds s"
        taskset -c 0 python3 "$repo/scripts/flood.py" "$mode" --port "$port" --connections "$connections" \
            --seconds "$((seconds + 5))" >"$flood_out" 2>&1 &
        flood_pid=$!
        sleep 3 # let the flood build up before measuring (not synchronisation: a warm-up)
    else
        echo "-" >"$flood_out"
        flood_pid=
    fi
    taskset -c 0 "$bin" bench load "$url" --rate "$rate" --clients 4 --max-seconds "$seconds" --no-progress \
        --label "under $mode" --json "$work/load-$mode.json" >"$work/load.txt" 2>&1 || true
    cat "$work/load.txt" >>"$out/summary.txt"
    [ -n "$flood_pid" ] && wait "$flood_pid" || true
    stat_json >"$work/after.json"
    python3 - "$work/load-$mode.json" "$mode" "$flood_out" "$work/before.json" "$work/after.json" >>"$work/table.md" <<'EOF'
import json, sys
path, mode, flood_out, before, after = sys.argv[1:6]
try:
    r = json.load(open(path))
    step = r["steps"][-1]
    lat = step.get("latency") or {}
    p50 = lat.get("p50_ns", 0) / 1e6
    p99 = lat.get("p99_ns", 0) / 1e6
    achieved = step.get("achieved_ops_per_s", 0)
    errors = step.get("errors", 0)
except Exception as e:  # the measurement itself failed: say so in the table
    p50 = p99 = achieved = 0
    errors = f"no report ({e})"
b, a = json.load(open(before)), json.load(open(after))
b, a = b.get("stats", b), a.get("stats", a)
d = lambda k: a.get(k, 0) - b.get(k, 0)
flood = open(flood_out).read().strip().splitlines()
flood = flood[-1] if flood else "-"
print(f"| {mode} | {flood} | {p50:.2f} ms | {p99:.2f} ms | {achieved:.0f} | {errors} | "
      f"{d('connections_refused_host_limit')} / {d('connections_closed_slow')} / {d('connections_closed_idle')} |")
EOF
    log "$(tail -1 "$work/table.md")"
done
mv "$work/table.md" "$out/table.md"
{
    echo "scripts/bench-floods.sh ${orig_args[*]}"
    echo "eagernfs $("$bin" --version | head -1) · $(uname -r) · $(nproc) CPUs · $nofile · $(date -u +%Y-%m-%dT%H:%MZ)"
} >"$out/command.txt"
cat "$out/table.md"
