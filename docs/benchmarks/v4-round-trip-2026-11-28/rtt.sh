#!/usr/bin/env bash
# rtt.sh ROUNDS CALLS NAME=SERVER_BIN:RTT_BIN...: per-call latency, NFSv3 against NFSv4.2, GETATTR
# of the export's root and READDIR(PLUS) of it (10 files), `task` and `inline` (as the FUSE mount
# calls); each NAME's server (all started first, each serving its own copy of the tree) and client
# in turn within each round; pinned (servers CPU 1, clients CPU 0). Also each server's context
# switches per call (all its threads, from /proc, warm-up calls included).
# Run under flock -x /work/bench.lock.
set -euo pipefail
rounds=$1; calls=$2; shift 2
declare -A srvpid url rttbin
w=$(mktemp -d /var/tmp/wta-rtt.XXXX)
cleanup() { for n in "${!srvpid[@]}"; do kill ${srvpid[$n]} 2>/dev/null || true; wait ${srvpid[$n]} 2>/dev/null || true; done; rm -rf $w; }
trap cleanup EXIT
names=()
for spec in "$@"; do
  n=${spec%%=*}; bins=${spec#*=}; srv=${bins%%:*}; rttbin[$n]=${bins#*:}; names+=($n)
  mkdir -p $w/$n/export $w/$n/state
  for i in $(seq 10); do echo $i > $w/$n/export/f$i; done
  port=$((20000 + RANDOM % 20000))
  taskset -c 1 $srv serve $w/$n/export --listen 127.0.0.1:$port --state-dir $w/$n/state -o rw,no_root_squash >$w/$n/state/out 2>$w/$n/state/log &
  srvpid[$n]=$!
  until grep -q "listening on" $w/$n/state/out 2>/dev/null; do sleep 0.1; done
  url[$n]=nfs://127.0.0.1:$port$w/$n/export
done
csw() { cat /proc/$1/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s+=$2} END {print s}'; }
warm=$(( calls / 10 > 100 ? calls / 10 : 100 ))
for r in $(seq $rounds); do
  for op in getattr readdir; do
    for mode in task inline; do
      for v in 3 4.2; do
        for n in "${names[@]}"; do
          c0=$(csw ${srvpid[$n]})
          out=$(taskset -c 0 ${rttbin[$n]} ${url[$n]} $op $v $mode $calls)
          c1=$(csw ${srvpid[$n]})
          echo "round $r $n $out srv_csw_per_call $(echo "scale=2; ($c1 - $c0) / ($calls + $warm)" | bc)"
        done
      done
    done
  done
done
