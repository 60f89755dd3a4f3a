#!/usr/bin/env bash
# ab.sh BIN STEP(find|cat) ROUNDS [perf]: `find` (or cat of every file) through `eagernfs mount`
# over NFSv3 and NFSv4 of one server, alternating, remounted (cold) before each, pinned (server
# CPU 1, mount and workload CPU 0); with `perf`, perf record -g of the server and the mount in
# the last round (/tmp/pp/perf-{srv,mnt}-v{3,4}.data). Run it under flock -x /work/bench.lock.
set -euo pipefail
mkdir -p /tmp/pp
[ -f /tmp/pp/tree.tar ] || tar -cf /tmp/pp/tree.tar -C /usr include
bin=$1; what=$2; rounds=$3; perf=${4:-}
w=$(mktemp -d /var/tmp/pp.XXXX); chmod 755 $w
mkdir -p $w/export $w/state $w/m3 $w/m4; chmod 777 $w/export
port=$((20000 + RANDOM % 20000))
taskset -c 1 $bin serve $w/export --listen 127.0.0.1:$port --state-dir $w/state -o rw,no_root_squash >$w/state/out 2>$w/state/log &
spid=$!
until grep -q "listening on" $w/state/out 2>/dev/null; do sleep 0.1; done
url=nfs://127.0.0.1:$port$w/export
mnt() { taskset -c 0 $bin mount $url $w/m$1 -o vers=$1; }
mnt 3; tar -xf /tmp/pp/tree.tar -C $w/m3; $bin umount $w/m3
for r in $(seq $rounds); do
  for v in 3 4; do
    mnt $v
    c0=$($bin stat $w/m$v | awk '/^ *[A-Z_]+ +[0-9]+/ && $1 != "NULL" {s+=$2} END{print s}')
    if [ -n "$perf" ] && [ $r = $rounds ]; then
      mpid=$(pgrep -n -f "mount $url $w/m$v" || true)
      perf record -F 2000 -g -o /tmp/pp/perf-srv-v$v.data -p $spid 2>/dev/null & p1=$!
      perf record -F 2000 -g -o /tmp/pp/perf-mnt-v$v.data -p $mpid 2>/dev/null & p2=$!
      sleep 0.5
    fi
    t0=$(date +%s.%N)
    if [ $what = find ]; then taskset -c 0 find $w/m$v -printf '%s\n' >/dev/null
    else taskset -c 0 sh -c "find $w/m$v -type f -exec cat {} + >/dev/null"; fi
    t1=$(date +%s.%N)
    if [ -n "$perf" ] && [ $r = $rounds ]; then kill -INT $p1 $p2; wait $p1 $p2 || true; fi
    c1=$($bin stat $w/m$v | awk '/^ *[A-Z_]+ +[0-9]+/ && $1 != "NULL" {s+=$2} END{print s}')
    echo "round $r v$v $what $(echo "$t1 - $t0" | bc) s calls $((c1-c0))"
    $bin umount $w/m$v
  done
done
kill $spid; wait $spid || true
rm -rf $w
