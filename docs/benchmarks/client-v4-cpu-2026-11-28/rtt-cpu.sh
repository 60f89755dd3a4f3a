#!/usr/bin/env bash
# rtt-cpu.sh ROUNDS CALLS SERVER_BIN NAME=RTT_BIN...: the client's CPU per call (task-clock of
# the whole `rtt` process, its start and warm-up included, divided by CALLS) for GETATTR and
# READDIR (10 entries), inline mode, NFSv3 and NFSv4.2, each NAME in turn within each round,
# against one server (SERVER_BIN, CPU 1; clients CPU 0). Run under flock -o -x /work/bench.lock.
set -euo pipefail
rounds=$1; calls=$2; srv=$3; shift 3
w=$(mktemp -d /var/tmp/wtc-rttcpu.XXXX)
mkdir -p $w/export $w/state
for i in $(seq 10); do echo $i > $w/export/f$i; done
port=$((20000 + RANDOM % 20000))
taskset -c 1 $srv serve $w/export --listen 127.0.0.1:$port --state-dir $w/state -o rw,no_root_squash >$w/state/out 2>$w/state/log &
pid=$!
trap 'kill $pid; wait $pid 2>/dev/null || true; rm -rf $w' EXIT
until grep -q "listening on" $w/state/out 2>/dev/null; do sleep 0.1; done
url=nfs://127.0.0.1:$port$w/export
for r in $(seq $rounds); do
  for op in getattr readdir; do
    for v in 3 4.2; do
      for spec in "$@"; do
        n=${spec%%=*}; bin=${spec#*=}
        out=$(perf stat -x, -e task-clock -o $w/perf.txt taskset -c 0 $bin $url $op $v inline $calls)
        ms=$(awk -F, '/task-clock/ {print $1}' $w/perf.txt)
        echo "round $r $n $op v$v cpu_us_per_call $(echo "scale=2; $ms * 1000 / $calls" | bc) $out"
      done
    done
  done
done
