#!/usr/bin/env bash
# prof.sh SERVER_BIN RTT_BIN VERS: perf record of the server and of the rtt client over 20000 READDIRs (task).
set -euo pipefail
srv=$1; rtt=$2; v=$3
w=$(mktemp -d /var/tmp/wta-prof.XXXX); mkdir -p $w/export $w/state
for i in $(seq 10); do echo $i > $w/export/f$i; done
port=$((20000 + RANDOM % 20000))
taskset -c 1 $srv serve $w/export --listen 127.0.0.1:$port --state-dir $w/state -o rw,no_root_squash >$w/state/out 2>$w/state/log &
spid=$!
trap 'kill $spid; wait $spid || true; rm -rf $w' EXIT
until grep -q "listening on" $w/state/out 2>/dev/null; do sleep 0.1; done
perf record -F 4000 -g -o /tmp/wta/srv-v$v.data -p $spid 2>/dev/null & p1=$!
sleep 0.3
taskset -c 0 perf record -F 4000 -g -o /tmp/wta/cli-v$v.data $rtt nfs://127.0.0.1:$port$w/export readdir $v task 20000 2>/dev/null
kill -INT $p1; wait $p1 || true
