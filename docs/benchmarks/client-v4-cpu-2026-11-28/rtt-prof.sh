#!/usr/bin/env bash
# rtt-prof.sh CALLS SERVER_BIN OUTDIR NAME=RTT_BIN...: `perf record` (4 kHz, no call graph) of
# each client doing CALLS inline READDIRs (10 entries) over NFSv3 and NFSv4.2, one server.
set -euo pipefail
calls=$1; srv=$2; out=$3; shift 3
mkdir -p $out
w=$(mktemp -d /var/tmp/wtc-rttprof.XXXX)
mkdir -p $w/export $w/state
for i in $(seq 10); do echo $i > $w/export/f$i; done
port=$((20000 + RANDOM % 20000))
taskset -c 1 $srv serve $w/export --listen 127.0.0.1:$port --state-dir $w/state -o rw,no_root_squash >$w/state/out 2>$w/state/log &
pid=$!
trap 'kill $pid; wait $pid 2>/dev/null || true; rm -rf $w' EXIT
until grep -q "listening on" $w/state/out 2>/dev/null; do sleep 0.1; done
for v in 3 4.2; do
  for spec in "$@"; do
    n=${spec%%=*}; bin=${spec#*=}
    perf record -q -F 4000 -o $out/$n-readdir-v$v.data taskset -c 0 $bin nfs://127.0.0.1:$port$w/export readdir $v inline $calls
  done
done
