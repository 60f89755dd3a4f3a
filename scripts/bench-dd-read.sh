#!/usr/bin/env bash
# A 1 GiB `dd` read through `eagernfs mount` from three servers, one after another in each
# round (issue 18: why the mount reads more slowly from eagernfs than from ganesha):
#   a  eagernfs serve --splice always (spliced READ replies)
#   b  eagernfs serve (READ data copied through a buffer, the default for a loopback client)
#   g  nfs-ganesha (FSAL_VFS)
# Each target serves its own directory on the same disk; mount and dd run on CPU 0, servers on CPU 1.
# "cold": the machine's page cache is dropped first (the disk reads are counted); "warm-mount":
# again through the same mount (its cache); "warm-server": a fresh mount of a server whose page
# cache holds the file. After dropping the cache the script waits SETTLE seconds (default 3): a VM
# with free-page reporting hands freed memory back to its host within about 2 s, and the first
# touch of such a page afterwards is slow; waiting makes every cold read meet that, as a file not
# read for a while does, instead of only some.
#
#   scripts/bench-dd-read.sh            (BIN=eagernfs binary, ROUNDS="1 2 3", MOPTS=mount options, SETTLE=3)
# Needs root, fuse3, nfs-ganesha and rpcbind (scripts/install-deps.sh).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$repo/target/release/eagernfs}
w=$(mktemp -d /var/tmp/ddab.XXXXXX)
port=$((20000 + RANDOM % 20000))
mkdir -p $w/{a,b,g,sa,sb,ma,mb,mg}
for d in a b g; do dd if=/dev/urandom of=$w/$d/big bs=1M count=1024 status=none; done
taskset -c 1 $bin serve $w/a --listen 127.0.0.1:$port --state-dir $w/sa -o rw,no_root_squash ${SPLICE_ARGS:---splice always} >$w/sa.out 2>&1 &
pa=$!
taskset -c 1 $bin serve $w/b --listen 127.0.0.1:$((port+3)) --state-dir $w/sb -o rw,no_root_squash ${NOSPLICE_ARGS:-} >$w/sb.out 2>&1 &
pb=$!
pgrep -x rpcbind >/dev/null || (setsid rpcbind -f </dev/null >/dev/null 2>&1 &)
gurl=$(GANESHA_RUN_DIR=$w/ganesha taskset -c 1 $repo/scripts/ganesha.sh start $w/g $((port+1)))
until grep -q "listening on" $w/sa.out && grep -q "listening on" $w/sb.out; do sleep 0.1; done
trap 'for m in ma mb mg; do $bin umount $w/$m 2>/dev/null || true; done; kill $pa $pb; GANESHA_RUN_DIR=$w/ganesha $repo/scripts/ganesha.sh stop >/dev/null 2>&1 || true; rm -rf $w' EXIT
# The disk under the work directory, for its read counters in /proc/diskstats.
disk=$(basename "$(findmnt -no SOURCE -T "$w")")
# The order turns each round (a b g, b g a, g a b, ...): no target always runs first.
order=(a b g)
for r in ${ROUNDS:-1 2 3}; do
 for t in "${order[@]}"; do
  case $t in a) url=nfs://127.0.0.1:$port$w/a;; b) url=nfs://127.0.0.1:$((port+3))$w/b;; g) url=$gurl;; esac
  taskset -c 0 $bin mount "$url" $w/m$t -o vers=3${MOPTS:+,$MOPTS}
  sync; echo 3 > /proc/sys/vm/drop_caches; sleep "${SETTLE:-3}"
  d0=($(awk -v disk="$disk" '$3==disk{print $4, $6, $7}' /proc/diskstats))
  s=$(date +%s.%N); taskset -c 0 dd if=$w/m$t/big of=/dev/null bs=1M status=none; e=$(date +%s.%N)
  d1=($(awk -v disk="$disk" '$3==disk{print $4, $6, $7}' /proc/diskstats))
  echo "round $r $t cold $(echo "$e - $s" | bc) disk reads $((d1[0]-d0[0])) sectors $((d1[1]-d0[1])) ms $((d1[2]-d0[2]))"
  s=$(date +%s.%N); taskset -c 0 dd if=$w/m$t/big of=/dev/null bs=1M status=none; e=$(date +%s.%N)
  echo "round $r $t warm-mount $(echo "$e - $s" | bc)"
  $bin umount $w/m$t; taskset -c 0 $bin mount "$url" $w/m$t -o vers=3${MOPTS:+,$MOPTS}
  s=$(date +%s.%N); taskset -c 0 dd if=$w/m$t/big of=/dev/null bs=1M status=none; e=$(date +%s.%N)
  echo "round $r $t warm-server $(echo "$e - $s" | bc)"
  $bin umount $w/m$t
 done
 order=("${order[@]:1}" "${order[0]}")
done
