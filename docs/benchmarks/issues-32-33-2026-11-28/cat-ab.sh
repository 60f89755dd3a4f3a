#!/bin/bash
cd /var/tmp/ab
for r in 1 2 3 4 5 6; do for v in before-e7de086 after-aa9165b; do m=/var/tmp/ab/m-$v; mkdir -p $m
taskset -c 0 /work/eagernfs-$v mount "nfs://127.0.0.1:31003/var/tmp/ab/ex" $m -o port=31003,mountport=31003 >/dev/null 2>&1
s=$(date +%s.%N); taskset -c 0 sh -c "find $m/tree -type f -print0 | xargs -0 cat > /dev/null"; e=$(date +%s.%N)
c=$(/work/eagernfs-$v stat $m 2>/dev/null | grep -E -i 'calls|total' | head -2 | tr '\n' ' ')
umount $m; echo "$v $(echo "$e - $s" | bc) $c"; done; done
