#!/usr/bin/env bash
# mount-cpu.sh ROUNDS NAME=BIN...: the mount daemon's CPU per call, per step (untar of
# /usr/include then `sync -f`, a cold `find` after a remount, `rm -r`), NFSv3 and NFSv4.2, for
# each binary NAME (its own server and mount), alternating within each round. Pinned: the
# workload and the mount on CPU 0, the server on CPU 1 (`--journal` on /dev/shm, as
# scripts/bench-mount.sh --server-args starts it). CPU from `perf stat -e task-clock -p DAEMON`
# around the step; calls from `eagernfs stat MOUNT` (all procedures but NULL).
# PROFILE=1: instead of perf stat, `perf record -g` of the daemon per step into $OUT/NAME-vV-STEP.data.
# `eagernfs stat` after each step (cumulative since the mount) in $OUT/NAME-vV-STEP-rR.stat.
# Prints one line per (round, name, version, step): seconds, daemon task-clock ms, calls, us/call.
# Run under flock -o -x /work/bench.lock.
set -euo pipefail
rounds=$1; shift
out=${OUT:-/var/tmp/wtc-prof}; mkdir -p "$out"
tarball=/var/tmp/wtc-include.tar
[ -f $tarball ] || tar -cf $tarball -C /usr include
w=$(mktemp -d /var/tmp/wtc-mcpu.XXXX); chmod 755 $w
declare -A srv url bin mpid
cleanup() {
  for m in $w/*/mnt; do mountpoint -q $m 2>/dev/null && { fusermount3 -u $m || fusermount3 -uz $m; } ; done
  for n in "${!srv[@]}"; do kill ${srv[$n]} 2>/dev/null || true; wait ${srv[$n]} 2>/dev/null || true; done
  rm -f /dev/shm/$(basename $w)-*.journal
  rm -rf $w
}
trap cleanup EXIT
names=()
for spec in "$@"; do
  n=${spec%%=*}; bin[$n]=${spec#*=}; names+=($n)
  mkdir -p $w/$n/export $w/$n/state $w/$n/mnt; chmod 777 $w/$n/export
  port=$((20000 + RANDOM % 20000))
  taskset -c 1 ${bin[$n]} serve $w/$n/export --listen 127.0.0.1:$port --state-dir $w/$n/state -o rw,no_root_squash \
    --journal /dev/shm/$(basename $w)-$n.journal >$w/$n/state/out 2>$w/$n/state/log &
  srv[$n]=$!
  until grep -q "listening on" $w/$n/state/out 2>/dev/null; do kill -0 ${srv[$n]}; sleep 0.1; done
  url[$n]=nfs://127.0.0.1:$port$w/$n/export
done
domount() { # name vers
  local m=$w/$1/mnt
  taskset -c 0 ${bin[$1]} mount -f ${url[$1]} $m -o vers=$2 2>$w/$1/mount.log &
  mpid[$1]=$!
  for i in $(seq 200); do mountpoint -q $m && return 0; sleep 0.05; done
  echo "mount of $1 did not appear" >&2; exit 1
}
doumount() { ${bin[$1]} umount $w/$1/mnt; wait ${mpid[$1]} 2>/dev/null || true; }
calls() { ${bin[$1]} stat $w/$1/mnt 2>/dev/null | awk '/^ *[A-Z_]+ +[0-9]+/ && $1 != "NULL" {s+=$2} END {print s+0}'; }
step() { # round name vers stepname command...
  local r=$1 n=$2 v=$3 s=$4; shift 4
  local c0 c1 t0 t1 p
  c0=$(calls $n)
  if [ "${PROFILE:-0}" = 1 ]; then
    perf record -q -g -F 4000 -o $out/$n-v$v-$s.data -p ${mpid[$n]} 2>/dev/null & p=$!
  else
    perf stat -x, -e task-clock -o $w/perf.txt -p ${mpid[$n]} & p=$!
  fi
  sleep 0.3
  t0=$(date +%s.%N)
  taskset -c 0 "$@" >/dev/null
  t1=$(date +%s.%N)
  kill -INT $p; wait $p || true
  c1=$(calls $n)
  ${bin[$n]} stat $w/$n/mnt > $out/$n-v$v-$s-r$r.stat 2>&1 || true
  local ms=0
  [ "${PROFILE:-0}" = 1 ] || ms=$(awk -F, '/task-clock/ {print $1}' $w/perf.txt)
  echo "round $r $n v$v $s secs $(echo "$t1 - $t0" | bc) cpu_ms $ms calls $((c1 - c0)) us_per_call $(echo "scale=2; $ms * 1000 / ($c1 - $c0)" | bc)"
}
for r in $(seq $rounds); do
  for v in 3 4.2; do
    for n in "${names[@]}"; do
      m=$w/$n/mnt
      domount $n $v
      step $r $n $v untar sh -c "tar -xf $tarball -C $m && sync -f $m"
      doumount $n; domount $n $v
      step $r $n $v find find $m -printf '%s\n'
      step $r $n $v rm-r rm -rf $m/include
      doumount $n
    done
  done
done
