#!/usr/bin/env bash
# prof.sh SERVER_BIN RTT_BIN VERS OP CALLS OUT.data: perf record (4 kHz, call graphs) of the
# server, started as rtt.sh starts it (journal in /dev/shm, pinned to CPU 1), over CALLS calls
# of OP (getattr, readdir, file) by the rtt client (CPU 0, inline). Prints the client's line.
# Run under flock -o -x /work/bench.lock.
set -euo pipefail
srv=$1; rtt=$2; v=$3; op=$4; calls=$5; out=$6
w=$(mktemp -d /var/tmp/srvcpu-prof.XXXX); mkdir -p "$w/export" "$w/state"
j=/dev/shm/$(basename "$w").journal
for i in $(seq 10); do echo "$i" > "$w/export/f$i"; done
port=$((20000 + RANDOM % 20000))
taskset -c 1 "$srv" serve "$w/export" --listen 127.0.0.1:$port --state-dir "$w/state" \
  -o rw,no_root_squash --journal "$j" >"$w/state/out" 2>"$w/state/log" &
spid=$!
trap 'kill $spid; wait $spid || true; rm -rf "$w" "$j"' EXIT
for _ in $(seq 300); do grep -q "listening on" "$w/state/out" 2>/dev/null && break; sleep 0.1; done
perf record -F 4000 -g -o "$out" -p $spid 2>/dev/null & p1=$!
sleep 0.3
RTT_SERVER_PID=$spid taskset -c 0 "$rtt" nfs://127.0.0.1:$port$w/export "$op" "$v" inline "$calls"
kill -INT $p1; wait $p1 || true
