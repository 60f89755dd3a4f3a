#!/usr/bin/env bash
# rtt.sh ROUNDS CALLS NAME=SERVER_BIN:RTT_BIN...: per-call latency and the server's CPU per call,
# NFSv3 against NFSv4.2, as the FUSE mount calls (`inline`): GETATTR of the export's root,
# READDIR(PLUS) of it (10 files), and a small file's write path (`file`: create, write-back at
# close, remove; see crates/bench/examples/rtt.rs). Each NAME's server (all started first, each
# serving its own copy of the tree, with a journal in /dev/shm as scripts/bench-mount.sh's
# --server-args "--journal /dev/shm/{state}.journal" runs them) and client in turn within each
# round; pinned (servers CPU 1, clients CPU 0). Journals and trees are removed at the end.
# Run under flock -o -x /work/bench.lock.
set -euo pipefail
rounds=$1; calls=$2; shift 2
declare -A srvpid url rttbin
w=$(mktemp -d /var/tmp/srvcpu-rtt.XXXX)
tag=$(basename "$w")
cleanup() {
  for n in "${!srvpid[@]}"; do kill "${srvpid[$n]}" 2>/dev/null || true; wait "${srvpid[$n]}" 2>/dev/null || true; done
  rm -rf "$w" /dev/shm/"$tag"-*.journal
}
trap cleanup EXIT
names=()
for spec in "$@"; do
  n=${spec%%=*}; bins=${spec#*=}; srv=${bins%%:*}; rttbin[$n]=${bins#*:}; names+=("$n")
  mkdir -p "$w/$n/export" "$w/$n/state"
  for i in $(seq 10); do echo "$i" > "$w/$n/export/f$i"; done
  port=$((20000 + RANDOM % 20000))
  taskset -c 1 "$srv" serve "$w/$n/export" --listen 127.0.0.1:$port --state-dir "$w/$n/state" \
    -o rw,no_root_squash --journal /dev/shm/"$tag-$n".journal >"$w/$n/state/out" 2>"$w/$n/state/log" &
  srvpid[$n]=$!
  for _ in $(seq 300); do grep -q "listening on" "$w/$n/state/out" 2>/dev/null && break; sleep 0.1; done
  grep -q "listening on" "$w/$n/state/out" || { cat "$w/$n/state/log" >&2; exit 1; }
  url[$n]=nfs://127.0.0.1:$port$w/$n/export
done
for r in $(seq "$rounds"); do
  for op in getattr readdir file; do
    for v in 3 4.2; do
      for n in "${names[@]}"; do
        RTT_SERVER_PID=${srvpid[$n]} taskset -c 0 "${rttbin[$n]}" "${url[$n]}" $op $v inline "$calls" |
          sed "s/^/round $r $n /"
      done
    done
  done
done
