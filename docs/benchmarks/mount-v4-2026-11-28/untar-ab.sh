#!/bin/bash
# quick A/B: untar through v3 and v4 mounts, CPU of server and mount
set -u
bin=/work/wt-f/target/release/eagernfs
w=/var/tmp/wtf-prof; rm -rf $w; mkdir -p $w/export $w/state $w/m3 $w/m4; chmod 777 $w/export
tar -cf $w/tree.tar -C /usr include
port=$((30000 + RANDOM % 10000))
taskset -c 1 $bin serve $w/export --listen 127.0.0.1:$port --state-dir $w/state -o rw,no_root_squash >$w/out 2>$w/log &
spid=$!
until grep -q "listening on" $w/out; do sleep 0.1; done
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
for v in 3 4 3 4; do
  taskset -c 0 $bin mount nfs://127.0.0.1:$port$w/export $w/m$v -o vers=$v
  mpid=$(pgrep -f "mount nfs://127.0.0.1:$port$w/export $w/m$v" | head -1)
  s0=$(cpu $spid); m0=$(cpu $mpid); t0=$(date +%s.%N)
  taskset -c 0 sh -c "tar -xf $w/tree.tar -C $w/m$v && sync -f $w/m$v"
  t1=$(date +%s.%N); s1=$(cpu $spid); m1=$(cpu $mpid)
  echo "vers=$v wall $(echo "$t1-$t0"|bc) server_ticks $((s1-s0)) mount_ticks $((m1-m0)) mpid $mpid"
  rm -rf $w/m$v/include
  $bin umount $w/m$v
done
kill $spid; wait $spid
rm -rf $w
